#pragma once
// Incremental decoding on the GPU: the CPU Decoder's steps (infer/decoder.h,
// DESIGN §1) with the weights, the KV cache and every activation on the
// device, all allocated at construction. A step of n tokens runs in chunks
// of at most kChunkRows rows (so a long prompt needs no activations of its
// length); a batch-1 step runs the weights through the GEMV kernel and, once
// captured, as one CUDA graph whose kernels read the token and its position
// from device memory, so one graph serves every position.
#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "cuda/cuda_entry.h"
#include "device/cuda_graph.h"
#include "model/param_layout.h"
#include "model/token_decoder.h"
#include "ops/linear/cuda_gemm.h"

namespace tinyllama::cuda {

class CudaDecoder final : public TokenDecoder {
 public:
  static constexpr int kChunkRows = 128;

  CudaDecoder(const ModelConfig& cfg, const std::vector<double>& params, int max_positions,
              const CudaDecodeOptions& options);
  ~CudaDecoder() override;
  CudaDecoder(const CudaDecoder&) = delete;
  CudaDecoder& operator=(const CudaDecoder&) = delete;

  std::vector<double> step(const std::vector<std::int32_t>& tokens,
                           bool all_logits = false) override;
  int position() const override { return position_; }
  int max_positions() const override { return max_positions_; }
  void reset() override { position_ = 0; }
  std::string describe() const override;
  // Whether batch-1 steps replay a captured graph (false when not asked
  // for, or when the capture failed and they run eagerly).
  bool graph_captured() const { return graph_ready_; }

 private:
  struct Device;  // cudaMalloc'd blocks, freed in the destructor
  Mat buffer(void* base, std::int64_t rows, std::int64_t cols, DType t) const;
  Mat weight(const ParamSlot& s) const;
  void upload_weights(const std::vector<double>& params);
  void upload_lookup(const std::vector<double>& params);
  // An embedding or norm slot's fp32 values (upload_lookup).
  Mat lookup(const ParamSlot& s) const;
  // out = RMSNorm(x) with the fp32 norm weight of w, rounded to out's dtype.
  void rmsnorm(Mat out, Mat rstd, Mat x, const ParamSlot& w);
  // Enqueues one chunk of n rows whose tokens and first position are in
  // device memory already; LM-head rows [first_logit, n) into logits_.
  void enqueue_chunk(int n, int first_logit);
  // out = in * w^T (+ out when accumulate): GEMV at one row, else cuBLASLt.
  void linear(Mat out, Mat in, Mat w, bool accumulate);
  // The batch-1 step through the fused GEMVs (gemv_fused.cu).
  void enqueue_fused_single();
  void capture_single();  // the batch-1 step as a graph
  void run_single();      // one batch-1 chunk: the graph's replay, or eagerly

  ModelConfig cfg_;
  ParamLayout layout_;
  int max_positions_;
  CudaDecodeOptions options_;
  int position_ = 0;
  int splits_ = 1;  // cache chunks of a batch-1 attention
  std::int64_t attention_scratch_floats_ = 0;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<GemmRunner> gemm_;
  std::unique_ptr<GraphRecorder> graph_;
  bool graph_ready_ = false;
  bool fused_ = false;         // batch-1 steps through enqueue_fused_single
  bool programmatic_ = false;  // the fused kernels launched with PDL
  std::unique_ptr<Device> dev_;
  // Where each slot of upload_lookup's fp32 copy starts, by layout offset.
  std::map<std::int64_t, std::int64_t> lookup_at_;
};

}  // namespace tinyllama::cuda
