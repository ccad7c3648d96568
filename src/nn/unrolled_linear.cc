// UnrolledLinear: see include/mona/nn/unrolled_linear.h.
#include "mona/nn/unrolled_linear.h"

#include <ATen/ATen.h>
#include <torch/autograd.h>

#include <vector>

#include "check.h"
#include "unrolled.h"

namespace mona::nn {

struct UnrolledLinear::Shared {
  at::Tensor w, w_t;               // [N, K], no autograd history (its gradient: the weights node's); w_t = w^T (a view)
  at::Tensor b;                    // [N] (zeros for none), no autograd history
  at::Tensor x;                    // [steps, B, K]: each step's input
  std::vector<at::Tensor> x_rows;  // steps x [B, K]: x's blocks (views made once)
  std::vector<at::Tensor> out_in;  // steps x [B, N]: the weights node's placeholder, per step
  int64_t B = 0, K = 0, N = 0, next = 0;
};

namespace {

// One step of UnrolledLinear: x_i and the step's row block of the weights node's output
// (which adds zeros: not read) -> x_i W^T + b.
struct UnrolledLinearStepFn : torch::autograd::Function<UnrolledLinearStepFn> {
  static at::Tensor forward(torch::autograd::AutogradContext* ctx, at::Tensor x, at::Tensor out_in,
                            const UnrolledLinear::Shared* s) {
    const at::Tensor& x_rows = s->x_rows[s->next];  // [B, K], this step's rows of the buffer
    detail::copy_block(x_rows, 0, x);
    ctx->saved_data["w"] = s->w;
    return detail::gemm_bias(s->b, x_rows, s->w_t);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    detail::check_first_order("mona::nn::UnrolledLinear", {}, grads);
    const at::Tensor dy = grads[0].contiguous();
    const at::Tensor dx = ctx->needs_input_grad(0) ? detail::gemm(dy, ctx->saved_data["w"].toTensor()) : at::Tensor();
    return {dx, dy, at::Tensor()};  // dL/d(out_in): the weights node's share
  }
};

}  // namespace

UnrolledLinear::UnrolledLinear(const at::Tensor& weight, const at::Tensor& bias, int64_t batch, int64_t steps)
    : shared_(std::make_shared<Shared>()) {
  const char* fn = "mona::nn::UnrolledLinear";
  MONA_CHECK(batch >= 0, fn, ": batch: expected >= 0, got ", batch);
  MONA_CHECK(steps >= 0, fn, ": steps: expected >= 0, got ", steps);
  detail::check_tensor(weight, fn, "weight", 2, "[N, K]");
  Shared& s = *shared_;
  s.B = batch;
  s.N = weight.size(0);
  s.K = weight.size(1);
  at::Tensor b = bias;
  if (b.defined()) {
    detail::check_tensor(b, fn, "bias", 1, "[N]");
    MONA_CHECK(b.size(0) == s.N && b.scalar_type() == weight.scalar_type(), fn, ": bias: expected [N = ", s.N,
               "] of dtype ", weight.scalar_type(), " (weight's), got ", b.sizes(), " of ", b.scalar_type());
  }
  s.x = at::zeros({steps, batch, s.K}, weight.options());
  s.x_rows = s.x.unbind(0);
  {
    at::NoGradGuard no_grad;
    s.w = weight.detach().contiguous();
    s.w_t = s.w.t();
    s.b = b.defined() ? b.detach().contiguous() : at::zeros({s.N}, weight.options());
  }
  if (steps > 0) {
    const std::vector<at::Tensor> weights{weight};
    std::vector<at::Tensor> biases;
    if (b.defined()) biases.push_back(b);
    s.out_in =
        detail::UnrolledWeightsFn::apply(at::TensorList(weights), at::TensorList(biases), &s.x, fn).unbind(0);
  }
}

at::Tensor UnrolledLinear::step(const at::Tensor& x) {
  const char* fn = "mona::nn::UnrolledLinear::step";
  Shared& s = *shared_;
  MONA_CHECK(s.next < static_cast<int64_t>(s.out_in.size()), fn, ": all ", s.out_in.size(),
             " steps the layer was made for are taken");
  detail::check_tensor(x, fn, "x", 2, "[B, K]");
  MONA_CHECK(x.size(0) == s.B && x.size(1) == s.K && x.scalar_type() == s.x.scalar_type(), fn,
             ": x: expected [B = ", s.B, ", K = ", s.K, "] of dtype ", s.x.scalar_type(), ", got ", x.sizes(), " of ",
             x.scalar_type());
  at::Tensor y = UnrolledLinearStepFn::apply(x, s.out_in[s.next], &s);
  ++s.next;
  return y;
}

int64_t UnrolledLinear::steps_taken() const { return shared_->next; }

}  // namespace mona::nn
