#pragma once
// The row order of q_proj and k_proj under the two RoPE conventions.
//
// tinyllama (DESIGN §1) rotates interleaved pairs: dims (2i, 2i+1) of a head
// turn by p·theta^(-2i/hd). Hugging Face's LLaMA rotates halves
// (rotate_half): dims (i, i + hd/2) turn by the same angle. The same
// rotation of the same pairs, so a model is carried over exactly by
// reordering the q and k projections' output rows inside every head:
//   HF row j of a head = tinyllama row 2j (j < hd/2), 2(j - hd/2) + 1 (else).
// Scores q·k are unchanged (both sides permuted alike); v and o are not
// touched.
#include <cstdint>

namespace tinyllama {

enum class RopeLayout { Interleaved, RotateHalf };

// The interleaved (tinyllama) row inside a head that HF row j holds.
std::int64_t interleaved_row_of_rotate_half_row(std::int64_t j, std::int64_t head_dim);

// Reorders the rows of a row-major [rows, cols] block of whole heads
// (rows a multiple of head_dim, which must be even) from one layout to the
// other. Throws std::invalid_argument on a shape that is not whole heads.
void reorder_rope_rows(double* data, std::int64_t rows, std::int64_t cols, std::int64_t head_dim,
                       RopeLayout from, RopeLayout to);

}  // namespace tinyllama
