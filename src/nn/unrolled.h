// Internal: the matrix products of mona's LSTMs and unrolled layers (lstm.cc,
// unrolled_linear.cc), and the node through which an unrolled layer's weights enter the
// graph of a training sequence (UnrolledLstmCell, UnrolledLinear).
#pragma once

#include <ATen/ATen.h>
#include <dnnl.h>
#include <pthread.h>
#include <signal.h>
#include <torch/autograd.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "check.h"

namespace mona::nn::detail {

// The matrix products. `out` [M, N] (rows contiguous) = beta * out + a [M, K] b [K, N], beta 0
// or 1, where a and b may be transposed views (t()) of row-major matrices. float32 goes to
// oneDNN's sgemm: at these sizes (M = B or B T rows, N and K 64-512) it takes 0.55-0.7 of
// the time of OpenBLAS's, which LibTorch calls, and its time grows with the rows where
// OpenBLAS's holds a fixed part per call (bench/notes.md, "The LSTMs' matrix products").
// float64 and any other layout go to LibTorch.
inline bool sgemm_layout(const at::Tensor& m, char& trans, int64_t& ld) {
  if (m.stride(1) == 1 && m.stride(0) >= std::max<int64_t>(1, m.size(1))) {
    trans = 'N';
    ld = m.stride(0);
    return true;
  }
  if (m.stride(0) == 1 && m.stride(1) >= std::max<int64_t>(1, m.size(0))) {
    trans = 'T';
    ld = m.stride(1);
    return true;
  }
  return false;
}

// Asynchronous signals held back on the calling thread while it lives. Debian's oneDNN
// (2.6) runs its float32 GEMM in JIT kernels that point the stack pointer into a heap buffer
// while they run (oneDNN issue #4845, fixed in 3.11): a signal delivered to the thread then
// has its frame written over that heap memory, and the process aborts later in malloc
// (`mona train` stopped by SIGINT: 4 of 12 runs; a Python user's Ctrl-C or a sampling
// profiler alike). Held back, such a signal arrives when the product has returned. The
// signals a fault raises (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS) and SIGABRT stay
// deliverable. Two sigprocmask calls per product, 0.3 us on the shared Intel Xeon: a step of
// the G2P recipe makes about 240 products, so about 80 us of its 19-25 ms (2026-11-28).
class AsyncSignalsHeld {
 public:
  AsyncSignalsHeld() { pthread_sigmask(SIG_BLOCK, &held(), &previous_); }
  ~AsyncSignalsHeld() { pthread_sigmask(SIG_SETMASK, &previous_, nullptr); }
  AsyncSignalsHeld(const AsyncSignalsHeld&) = delete;
  AsyncSignalsHeld& operator=(const AsyncSignalsHeld&) = delete;

 private:
  static const sigset_t& held() {
    static const sigset_t set = [] {
      sigset_t s;
      sigfillset(&s);
      for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT}) sigdelset(&s, sig);
      return s;
    }();
    return set;
  }
  sigset_t previous_;
};

inline void gemm_into(const at::Tensor& out, const at::Tensor& a, const at::Tensor& b, float beta) {
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  char ta = 'N', tb = 'N';
  int64_t lda = 0, ldb = 0;
  if (out.scalar_type() == at::kFloat && M > 0 && N > 0 && K > 0 && out.stride(1) == 1 && out.stride(0) >= N &&
      sgemm_layout(a, ta, lda) && sgemm_layout(b, tb, ldb)) {
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* pc = out.data_ptr<float>();
    dnnl_status_t status;
    {
      const AsyncSignalsHeld held;
      status = dnnl_sgemm(ta, tb, M, N, K, 1.0f, pa, lda, pb, ldb, beta, pc, out.stride(0));
    }
    MONA_CHECK(status == dnnl_success, "mona::nn: oneDNN's sgemm failed (status ", static_cast<int>(status), ") on [",
               M, ", ", K, "] x [", K, ", ", N, "]");
    return;
  }
  if (beta == 0) {
    at::Tensor o = out;
    at::mm_out(o, a, b);
  } else {
    out.addmm_(a, b);
  }
}

inline at::Tensor gemm(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  gemm_into(out, a, b, 0.0f);
  return out;
}

// Writes `src` into the columns [col, col + w) of every row of `dst` [rows, W]: src [rows, w],
// or [w] for the same values in every row. An unrolled layer's step assembles its product's
// operand from a few such blocks (the pieces of x_i, h_{i-1}, the bias). CPU matrices of one
// dtype whose rows are contiguous are copied row by row with memcpy; at::Tensor::copy_ (and
// the narrow and expand views it needs) costs a few microseconds each in dispatch, and a
// decoder step made about eight of them. Anything else goes through copy_.
inline void copy_block(const at::Tensor& dst, int64_t col, const at::Tensor& src) {
  const int64_t rows = dst.size(0), w = src.size(-1);
  const bool broadcast = src.dim() == 1;
  if (dst.dim() == 2 && (broadcast || (src.dim() == 2 && src.size(0) == rows)) && col >= 0 &&
      col + w <= dst.size(1) && dst.scalar_type() == src.scalar_type() && dst.is_cpu() && src.is_cpu() &&
      dst.layout() == at::kStrided && src.layout() == at::kStrided && dst.stride(1) == 1 && src.stride(-1) == 1) {
    const int64_t item = static_cast<int64_t>(dst.element_size());
    char* d = static_cast<char*>(dst.data_ptr()) + col * item;
    const char* s = static_cast<const char*>(src.data_ptr());
    const int64_t d_row = dst.stride(0) * item, s_row = broadcast ? 0 : src.stride(0) * item;
    for (int64_t r = 0; r < rows; ++r) std::memcpy(d + r * d_row, s + r * s_row, static_cast<size_t>(w * item));
    return;
  }
  const at::Tensor block = dst.narrow(1, col, w);
  block.copy_(broadcast ? src.expand({rows, w}) : src);
}

// bias (broadcast over the rows) + a b, what at::addmm(bias, a, b) returns.
inline at::Tensor gemm_bias(const at::Tensor& bias, const at::Tensor& a, const at::Tensor& b) {
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options());
  copy_block(out, 0, bias);
  gemm_into(out, a, b, 1.0f);
  return out;
}

// An unrolled layer's weights node, the one place where the weights enter the graph of the
// layer's steps over a training sequence. The layer's product is x_i W^T (+ biases), W
// [N, K] the weights side by side (column blocks, e.g. [W_ih W_hh]), x_i [B, K].
// Forward: a placeholder [steps, B, N] of zeros (one stored zero, expanded), of which each
// step takes its row block as an input that adds nothing to its output: its gradient is the
// step's dL/d(x_i W^T), so this node's backward receives that gradient for all steps at once.
// Backward: the weights' gradients as one GEMM over all steps (sum_i dL/d(x_i W^T)^T x_i,
// split into the blocks) and every bias's gradient as one sum, with the steps' inputs x_i
// that the steps wrote into `inputs` [steps, B, K] (kept in saved_data, not saved as a
// variable: the steps write it after this node is made). `fn` names the layer in errors.
struct UnrolledWeightsFn : torch::autograd::Function<UnrolledWeightsFn> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, at::TensorList weights, at::TensorList biases,
                            const at::Tensor* inputs, const char* fn) {
    std::vector<int64_t> widths;
    for (const at::Tensor& w : weights) widths.push_back(w.size(1));
    ctx->saved_data["inputs"] = *inputs;
    ctx->saved_data["widths"] = widths;
    ctx->saved_data["biases"] = static_cast<int64_t>(biases.size());
    ctx->saved_data["fn"] = std::string(fn);
    return at::zeros({1}, weights[0].options()).expand({inputs->size(0), inputs->size(1), weights[0].size(0)});
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    const std::string fn = ctx->saved_data["fn"].toStringRef();
    check_first_order(fn.c_str(), {}, grads);
    const at::Tensor x = ctx->saved_data["inputs"].toTensor();
    const std::vector<int64_t> widths = ctx->saved_data["widths"].toIntVector();
    const int64_t n_weights = static_cast<int64_t>(widths.size()), n_biases = ctx->saved_data["biases"].toInt();
    const int64_t S = x.size(0), B = x.size(1), K = x.size(2);
    const at::Tensor dY = grads[0].contiguous().view({S * B, -1});
    torch::autograd::variable_list out;
    bool any_weight = false;
    for (int64_t k = 0; k < n_weights; ++k) any_weight = any_weight || ctx->needs_input_grad(k);
    const at::Tensor dW = any_weight ? gemm(dY.t(), x.view({S * B, K})) : at::Tensor();
    int64_t col = 0;
    for (int64_t k = 0; k < n_weights; ++k) {
      out.push_back(ctx->needs_input_grad(k) ? dW.narrow(1, col, widths[k]) : at::Tensor());
      col += widths[k];
    }
    // Every bias gets the same sum, each its own tensor (parameters' .grad never share storage).
    at::Tensor db;
    for (int64_t k = 0; k < n_biases; ++k) {
      if (!ctx->needs_input_grad(n_weights + k)) {
        out.push_back(at::Tensor());
      } else if (!db.defined()) {
        db = dY.sum(0);
        out.push_back(db);
      } else {
        out.push_back(db.clone());
      }
    }
    out.push_back(at::Tensor());  // inputs
    out.push_back(at::Tensor());  // fn
    return out;
  }
};

}  // namespace mona::nn::detail
