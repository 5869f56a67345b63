#!/usr/bin/env python3
"""Unit tests of scripts/check_function_length.py's scanner and check.

    python3 tests/python/test_check_function_length.py   (CTest: function_length_parser)
"""
import contextlib
import io
import pathlib
import sys
import tempfile
import textwrap
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "scripts"))
import check_function_length as cfl  # noqa: E402


def scan(code):
    """(name, first line, last line, device) of each function in code."""
    return [(f.name, f.line, f.end, f.device) for f in cfl.functions(textwrap.dedent(code))]


class ScannerTest(unittest.TestCase):
    def test_free_functions_and_lengths(self):
        got = scan("""\
            int add(int a, int b) {
              return a + b;
            }
            void nothing() {}
            """)
        self.assertEqual(got, [("add", 1, 3, False), ("nothing", 4, 4, False)])
        self.assertEqual(cfl.functions("void f() {\n\n}\n")[0].length, 3)

    def test_declarations_and_variables_are_not_functions(self):
        got = scan("""\
            int declared(int);
            int table[] = {1, 2, 3};
            std::vector<int> v{1, 2};
            const auto lambda = [](int x) {
              return x;
            };
            enum class Color { kRed, kBlue };
            struct Point { int x{0}; int y = 1; };
            Foo() = default;
            """)
        self.assertEqual(got, [])

    def test_lambdas_count_toward_the_enclosing_function(self):
        got = scan("""\
            void outer() {
              auto f = [&](int x) {
                return x + 1;
              };
              std::sort(v.begin(), v.end(), [](int a, int b) { return a < b; });
            }
            int after() { return 0; }
            """)
        self.assertEqual(got, [("outer", 1, 6, False), ("after", 7, 7, False)])

    def test_braces_in_strings_chars_and_comments(self):
        got = scan("""\
            void printer() {
              std::puts("}}} {");
              char c = '}';
              char d = '\\'';
              const char* s = "\\"}";
              // } a comment with a brace
              /* { and
                 } across lines */
              int big = 1'000'000;
              auto raw = R"x(})" still raw {)x";
            }
            void second() {}
            """)
        self.assertEqual(got, [("printer", 1, 11, False), ("second", 12, 12, False)])

    def test_preprocessor_lines_are_skipped(self):
        got = scan("""\
            #define BLOCK(x) do { x; } while (0)
            #define OPEN \\
              {
            void f() {
            #pragma unroll
              BLOCK(g());
            }
            """)
        self.assertEqual(got, [("f", 4, 7, False)])

    def test_namespaces_and_extern_c_are_looked_into(self):
        got = scan("""\
            namespace tl {
            namespace {
            void hidden() {
            }
            }  // namespace
            namespace a::b {
            int nested() { return 1; }
            }
            extern "C" {
            void c_api() {}
            }
            extern "C" void single() {}
            }  // namespace tl
            """)
        self.assertEqual([g[0] for g in got], ["hidden", "nested", "c_api", "single"])
        self.assertEqual(got[0][1:3], (3, 4))

    def test_classes_with_inline_methods(self):
        got = scan("""\
            class Widget : public Base<int> {
             public:
              explicit Widget(int n) : n_(n) {}
              ~Widget() override {}
              int size() const noexcept { return n_; }
              bool operator==(const Widget& o) const { return n_ == o.n_; }
              int operator()(int x) const { return x; }
              auto get() const -> int {
                return n_;
              }
              template <typename F>
              void each(F&& f) {
                f(n_);
              }
              struct Inner {
                void deep() {}
              };
             private:
              int n_{0};
              std::vector<int> v_ = {1, 2};
            };
            struct alignas(16) Aligned {
              void a() {}
            };
            """)
        self.assertEqual([g[0] for g in got],
                         ["Widget", "~Widget", "size", "operator==", "operator()", "get", "each",
                          "deep", "a"])
        self.assertEqual(got[5][1:3], (8, 10))

    def test_constructor_initializer_lists(self):
        # A function's lines run from its body's opening brace.
        got = scan("""\
            Foo::Foo(int a, int b)
                : a_(a),
                  b_{b},
                  c_(std::vector<int>{1, 2}),
                  base_{} {
              run();
            }
            Bar::Bar() : x_{1}, y_{2} {}
            Bar::~Bar() {}
            """)
        self.assertEqual(got, [("Foo::Foo", 5, 7, False), ("Bar::Bar", 8, 8, False),
                               ("Bar::~Bar", 9, 9, False)])

    def test_qualified_names_templates_and_multiline_headers(self):
        got = scan("""\
            template <typename T, int N = 4>
            std::map<int, T> Table<T>::lookup(const T& key,
                                              int n) const {
              return {};
            }
            [[nodiscard]] static inline int attr() { return 0; }
            """)
        self.assertEqual(got, [("Table<T>::lookup", 3, 5, False), ("attr", 6, 6, False)])

    def test_device_functions_are_marked(self):
        got = scan("""\
            template <int kBlock>
            __global__ void __launch_bounds__(256) kernel(float* x) {
              x[0] = 1;
            }
            __device__ __forceinline__ float helper(float v) { return v; }
            __host__ __device__ inline int both() { return 1; }
            void launch() {
              kernel<128><<<1, 1>>>(nullptr);
            }
            """)
        self.assertEqual(got, [("kernel", 2, 4, True), ("helper", 5, 5, True),
                               ("both", 6, 6, True), ("launch", 7, 9, False)])

    def test_control_statements_are_not_names(self):
        # A stray block at file scope after a macro call without ';'.
        self.assertEqual(scan("if (x) {\n}\n"), [])


class CheckTest(unittest.TestCase):
    def run_check(self, files, allowlist, limit=3):
        with tempfile.TemporaryDirectory() as tmp:
            root = pathlib.Path(tmp)
            for rel, text in files.items():
                (root / rel).parent.mkdir(parents=True, exist_ok=True)
                (root / rel).write_text(textwrap.dedent(text))
            (root / "scripts").mkdir(exist_ok=True)
            (root / cfl.ALLOWLIST).write_text(allowlist)
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                rc = cfl.main([str(root), "--limit", str(limit)])
            return rc, out.getvalue()

    LONG = """\
        void long_one() {
          a();
          b();
          c();
        }
        void short_one() {}
        __global__ void long_kernel() {
          a();
          b();
        }
        """

    def test_unlisted_long_function_fails(self):
        rc, out = self.run_check({"src/x/a.cc": self.LONG}, "")
        self.assertEqual(rc, 1)
        self.assertIn("src/x/a.cc:1: long_one (5 lines)", out)
        self.assertIn("src/x/a.cc:7: long_kernel (4 lines) [device]", out)
        self.assertIn("2 functions over 3", out)

    def test_listed_long_function_passes(self):
        rc, out = self.run_check({"src/x/a.cc": self.LONG},
                                 "# comment\nsrc/x/a.cc long_one\nsrc/x/a.cc long_kernel\n")
        self.assertEqual(rc, 0, out)
        self.assertIn("ok", out)

    def test_stale_entry_fails(self):
        rc, out = self.run_check({"src/x/a.cc": self.LONG},
                                 "src/x/a.cc long_one\nsrc/x/a.cc short_one\n")
        self.assertEqual(rc, 1)
        self.assertIn("short_one is listed", out)

    def test_only_src_cli_and_bench_are_scanned(self):
        rc, _ = self.run_check({"tests/x_test.cc": self.LONG, "cli/ok.h": "void f() {}\n"}, "")
        self.assertEqual(rc, 0)


if __name__ == "__main__":
    unittest.main()
