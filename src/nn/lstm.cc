// The LSTM layer and cell as autograd functions over mona/core/lstm.h; see
// include/mona/nn/lstm.h.
#include "mona/nn/lstm.h"

#include <ATen/ATen.h>
#include <ATen/Dispatch.h>
#include <torch/autograd.h>

#include "check.h"
#include "mona/core/lstm.h"
#include "unrolled.h"

namespace mona::nn {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using detail::gemm;
using detail::gemm_bias;
using detail::gemm_into;

// The kernels of one step on [B, 4H] gates and [B, H] states (contiguous tensors).
void cell_forward(at::Tensor& gates, const at::Tensor& b_hh, const at::Tensor& c_prev, at::Tensor& c,
                  at::Tensor& h) {
  AT_DISPATCH_FLOATING_TYPES(gates.scalar_type(), "lstm_cell", [&] {
    core::lstm_cell(gates.data_ptr<scalar_t>(), b_hh.data_ptr<scalar_t>(), c_prev.data_ptr<scalar_t>(),
                    c.data_ptr<scalar_t>(), h.data_ptr<scalar_t>(), c.size(0), c.size(1));
  });
}

void cell_backward(const at::Tensor& gates, const at::Tensor& c_prev, const at::Tensor& c, const at::Tensor& grad_h,
                   const at::Tensor& grad_c, at::Tensor& grad_gates, at::Tensor& grad_c_prev) {
  AT_DISPATCH_FLOATING_TYPES(gates.scalar_type(), "lstm_cell_backward", [&] {
    core::lstm_cell_backward(gates.data_ptr<scalar_t>(), c_prev.data_ptr<scalar_t>(), c.data_ptr<scalar_t>(),
                             grad_h.data_ptr<scalar_t>(), grad_c.data_ptr<scalar_t>(),
                             grad_gates.data_ptr<scalar_t>(), grad_c_prev.data_ptr<scalar_t>(), c.size(0),
                             c.size(1));
  });
}

// The gradients of b_ih and b_hh are the same sum; two tensors, so that the two parameters'
// .grad never share storage.
std::pair<at::Tensor, at::Tensor> bias_grads(AutogradContext* ctx, const at::Tensor& grad_gates, int first) {
  if (!ctx->needs_input_grad(first) && !ctx->needs_input_grad(first + 1)) return {};
  at::Tensor db = grad_gates.sum(0);
  return {db, ctx->needs_input_grad(first + 1) ? db.clone() : at::Tensor()};
}

struct LstmLayerFn : torch::autograd::Function<LstmLayerFn> {
  // x [B, T, D] with T >= 1, h0 and c0 [B, H]; returns y [B, T, H], h_T and c_T.
  static variable_list forward(AutogradContext* ctx, at::Tensor x, at::Tensor h0, at::Tensor c0, at::Tensor w_ih,
                               at::Tensor w_hh, at::Tensor b_ih, at::Tensor b_hh) {
    const int64_t B = x.size(0), T = x.size(1), D = x.size(2), H = w_hh.size(1);
    // Time-major, so that each step's rows are contiguous.
    const at::Tensor xs = x.transpose(0, 1).contiguous();
    at::Tensor gates = gemm_bias(b_ih, xs.view({T * B, D}), w_ih.t()).view({T, B, 4 * H});
    at::Tensor hs = at::empty({T + 1, B, H}, x.options()), cs = at::empty({T + 1, B, H}, x.options());
    hs[0].copy_(h0);
    cs[0].copy_(c0);
    std::vector<at::Tensor> g = gates.unbind(0), h = hs.unbind(0), c = cs.unbind(0);
    const at::Tensor w_hh_t = w_hh.t();  // one view for all steps
    for (int64_t t = 0; t < T; ++t) {
      gemm_into(g[t], h[t], w_hh_t, 1.0f);
      cell_forward(g[t], b_hh, c[t], c[t + 1], h[t + 1]);
    }
    ctx->save_for_backward({xs, gates, hs, cs, w_ih, w_hh});
    // Copies: a caller's in-place change of an output must not reach the saved states.
    return {hs.narrow(0, 1, T).transpose(0, 1).clone(at::MemoryFormat::Contiguous), h[T].clone(), c[T].clone()};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    detail::check_first_order("mona::nn::lstm_layer", s, grads);
    const at::Tensor &xs = s[0], &gates = s[1], &hs = s[2], &cs = s[3], &w_ih = s[4], &w_hh = s[5];
    const int64_t T = xs.size(0), B = xs.size(1), D = xs.size(2), H = w_hh.size(1);
    // dL/dh of every step, the recurrence's part added in place as it is computed.
    at::Tensor dh = grads[0].transpose(0, 1).clone(at::MemoryFormat::Contiguous);  // [T, B, H]
    dh[T - 1].add_(grads[1]);
    at::Tensor dc = grads[2].clone(at::MemoryFormat::Contiguous);  // dL/dc of the step, in place
    at::Tensor dgates = at::empty({T, B, 4 * H}, xs.options());
    const std::vector<at::Tensor> g = gates.unbind(0), c = cs.unbind(0), dhv = dh.unbind(0);
    std::vector<at::Tensor> dg = dgates.unbind(0);
    for (int64_t t = T - 1; t >= 0; --t) {
      cell_backward(g[t], c[t], c[t + 1], dhv[t], dc, dg[t], dc);
      if (t > 0) gemm_into(dhv[t - 1], dg[t], w_hh, 1.0f);
    }
    const at::Tensor dG = dgates.view({T * B, 4 * H});
    at::Tensor dx, dh0, dc0, dw_ih, dw_hh;
    if (ctx->needs_input_grad(0)) dx = gemm(dG, w_ih).view({T, B, D}).transpose(0, 1);
    if (ctx->needs_input_grad(1)) dh0 = gemm(dg[0], w_hh);
    if (ctx->needs_input_grad(2)) dc0 = dc;
    if (ctx->needs_input_grad(3)) dw_ih = gemm(dG.t(), xs.view({T * B, D}));
    if (ctx->needs_input_grad(4)) dw_hh = gemm(dG.t(), hs.narrow(0, 0, T).reshape({T * B, H}));
    auto [db_ih, db_hh] = bias_grads(ctx, dG, 5);
    return {dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh};
  }
};

struct LstmCellFn : torch::autograd::Function<LstmCellFn> {
  // x [B, D], h and c [B, H] (contiguous); returns (h', c').
  static variable_list forward(AutogradContext* ctx, at::Tensor x, at::Tensor h, at::Tensor c, at::Tensor w_ih,
                               at::Tensor w_hh, at::Tensor b_ih, at::Tensor b_hh) {
    at::Tensor gates = gemm_bias(b_ih, x, w_ih.t());
    gemm_into(gates, h, w_hh.t(), 1.0f);
    at::Tensor h_new = at::empty_like(c), c_new = at::empty_like(c);
    cell_forward(gates, b_hh, c, c_new, h_new);
    ctx->save_for_backward({x, h, c, w_ih, w_hh, gates, c_new});
    return {h_new, c_new};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    detail::check_first_order("mona::nn::lstm_cell", s, grads);
    const at::Tensor &x = s[0], &h = s[1], &c = s[2], &w_ih = s[3], &w_hh = s[4], &gates = s[5], &c_new = s[6];
    at::Tensor dgates = at::empty_like(gates), dc = at::empty_like(c);
    cell_backward(gates, c, c_new, grads[0].contiguous(), grads[1].contiguous(), dgates, dc);
    at::Tensor dx, dh, dw_ih, dw_hh;
    if (ctx->needs_input_grad(0)) dx = gemm(dgates, w_ih);
    if (ctx->needs_input_grad(1)) dh = gemm(dgates, w_hh);
    if (ctx->needs_input_grad(3)) dw_ih = gemm(dgates.t(), x);
    if (ctx->needs_input_grad(4)) dw_hh = gemm(dgates.t(), h);
    auto [db_ih, db_hh] = bias_grads(ctx, dgates, 5);
    return {dx, dh, ctx->needs_input_grad(2) ? dc : at::Tensor(), dw_ih, dw_hh, db_ih, db_hh};
  }
};

// The weights' checks against the input width D; returns H. Undefined biases become zeros
// (a custom function's tensor arguments must be defined).
int64_t check_weights(LstmWeights& w, int64_t D, const at::Tensor& ref, const char* fn) {
  detail::check_tensor(w.w_hh, fn, "w_hh", 2, "[4H, H]");
  const int64_t H = w.w_hh.size(1);
  detail::check_sizes(w.w_hh, {4 * H, H}, ref, fn, "w_hh", "[4H, H]", "x");
  detail::check_tensor(w.w_ih, fn, "w_ih", 2, "[4H, D]");
  detail::check_sizes(w.w_ih, {4 * H, D}, ref, fn, "w_ih", "[4H, D]", "x");
  for (auto [b, name] : {std::pair<at::Tensor*, const char*>{&w.b_ih, "b_ih"}, {&w.b_hh, "b_hh"}}) {
    if (!b->defined()) {
      *b = at::zeros({4 * H}, ref.options());
      continue;
    }
    detail::check_tensor(*b, fn, name, 1, "[4H]");
    detail::check_sizes(*b, {4 * H}, ref, fn, name, "[4H]", "x");
    *b = b->contiguous();
  }
  return H;
}

// An initial or previous state [B, H] (undefined: zeros), contiguous.
at::Tensor state_or_zeros(const at::Tensor& s, int64_t B, int64_t H, const at::Tensor& ref, const char* fn,
                          const char* name) {
  if (!s.defined()) return at::zeros({B, H}, ref.options());
  detail::check_tensor(s, fn, name, 2, "[B, H]");
  detail::check_sizes(s, {B, H}, ref, fn, name, "[B, H]", "x");
  return s.contiguous();
}

}  // namespace

struct UnrolledLstmCell::Shared {
  at::Tensor w, w_t;                 // [4H, D + H]: [W_ih W_hh], no autograd history; w_t its transpose (a view)
  at::Tensor b_ih, b_hh;             // [4H] each, no autograd history (their gradients: the weights node's)
  at::Tensor xh;                     // [steps, B, D + H]: each step's [x_i h_{i-1}]
  std::vector<at::Tensor> xh_rows;   // steps x [B, D + H]: xh's blocks (views made once)
  std::vector<at::Tensor> gates_in;  // steps x [B, 4H]: the weights node's placeholder, per step
  int64_t B = 0, D = 0, H = 0, next = 0;
};

namespace {

// One step of UnrolledLstmCell: inputs (the pieces of x_i, h, c, the step's row block of the
// weights node's output); returns (h', c').
struct UnrolledStepFn : torch::autograd::Function<UnrolledStepFn> {
  static variable_list forward(AutogradContext* ctx, at::TensorList inputs, at::Tensor h, at::Tensor c,
                               at::Tensor gates_in, const UnrolledLstmCell::Shared* s) {
    const at::Tensor& xh = s->xh_rows[s->next];  // [B, D + H], this step's rows of the buffer
    std::vector<int64_t> widths;
    int64_t at_col = 0;
    for (const at::Tensor& x : inputs) {
      detail::copy_block(xh, at_col, x);
      widths.push_back(x.size(1));
      at_col += x.size(1);
    }
    detail::copy_block(xh, s->D, h);
    at::Tensor gates = gemm_bias(s->b_ih, xh, s->w_t);  // gates_in adds zeros: not read
    at::Tensor h_new = at::empty_like(c), c_new = at::empty_like(c);
    cell_forward(gates, s->b_hh, c, c_new, h_new);
    ctx->save_for_backward({c, gates, c_new});
    ctx->saved_data["w"] = s->w;
    ctx->saved_data["widths"] = widths;
    return {h_new, c_new};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto s = ctx->get_saved_variables();
    detail::check_first_order("mona::nn::UnrolledLstmCell", s, grads);
    const at::Tensor &c = s[0], &gates = s[1], &c_new = s[2];
    const at::Tensor w = ctx->saved_data["w"].toTensor();
    at::Tensor dgates = at::empty_like(gates), dc = at::empty_like(c);
    cell_backward(gates, c, c_new, grads[0].contiguous(), grads[1].contiguous(), dgates, dc);
    const at::Tensor dxh = gemm(dgates, w);  // [B, D + H]
    variable_list out;
    int64_t at_col = 0;
    for (const int64_t width : ctx->saved_data["widths"].toIntVector()) {
      out.push_back(dxh.narrow(1, at_col, width));
      at_col += width;
    }
    out.push_back(dxh.narrow(1, at_col, dxh.size(1) - at_col));  // dL/dh
    out.push_back(dc);
    out.push_back(dgates);  // dL/d(gates_in): the weights node's share
    out.push_back(at::Tensor());
    return out;
  }
};

}  // namespace

LstmLayerOutput lstm_layer(const at::Tensor& x, const LstmWeights& weights, const at::Tensor& h0,
                           const at::Tensor& c0) {
  const char* fn = "mona::nn::lstm_layer";
  detail::check_tensor(x, fn, "x", 3, "[B, T, D]");
  LstmWeights w = weights;
  const int64_t B = x.size(0), T = x.size(1), H = check_weights(w, x.size(2), x, fn);
  const at::Tensor h = state_or_zeros(h0, B, H, x, fn, "h0"), c = state_or_zeros(c0, B, H, x, fn, "c0");
  if (T == 0) return {at::empty({B, 0, H}, x.options()), h, c};
  const variable_list out = LstmLayerFn::apply(x, h, c, w.w_ih, w.w_hh, w.b_ih, w.b_hh);
  return {out[0], out[1], out[2]};
}

std::tuple<at::Tensor, at::Tensor> lstm_cell(const at::Tensor& x, const at::Tensor& h, const at::Tensor& c,
                                             const LstmWeights& weights) {
  const char* fn = "mona::nn::lstm_cell";
  detail::check_tensor(x, fn, "x", 2, "[B, D]");
  LstmWeights w = weights;
  const int64_t B = x.size(0), H = check_weights(w, x.size(1), x, fn);
  const variable_list out = LstmCellFn::apply(x.contiguous(), state_or_zeros(h, B, H, x, fn, "h"),
                                              state_or_zeros(c, B, H, x, fn, "c"), w.w_ih, w.w_hh, w.b_ih,
                                              w.b_hh);
  return {out[0], out[1]};
}

UnrolledLstmCell::UnrolledLstmCell(const LstmWeights& weights, int64_t batch, int64_t steps)
    : shared_(std::make_shared<Shared>()) {
  const char* fn = "mona::nn::UnrolledLstmCell";
  MONA_CHECK(batch >= 0, fn, ": batch: expected >= 0, got ", batch);
  MONA_CHECK(steps >= 0, fn, ": steps: expected >= 0, got ", steps);
  detail::check_tensor(weights.w_ih, fn, "w_ih", 2, "[4H, D]");
  LstmWeights w = weights;
  Shared& s = *shared_;
  s.B = batch;
  s.D = w.w_ih.size(1);
  s.H = check_weights(w, s.D, w.w_ih, fn);
  s.xh = at::zeros({steps, batch, s.D + s.H}, w.w_ih.options());
  s.xh_rows = s.xh.unbind(0);
  {
    at::NoGradGuard no_grad;
    s.w = at::cat({w.w_ih, w.w_hh}, 1);
    s.w_t = s.w.t();
    s.b_ih = w.b_ih.detach();
    s.b_hh = w.b_hh.detach();
  }
  if (steps > 0) {
    const std::vector<at::Tensor> ws{w.w_ih, w.w_hh}, bs{w.b_ih, w.b_hh};
    s.gates_in = detail::UnrolledWeightsFn::apply(at::TensorList(ws), at::TensorList(bs), &s.xh, fn).unbind(0);
  }
}

std::tuple<at::Tensor, at::Tensor> UnrolledLstmCell::step(const std::vector<at::Tensor>& inputs, const at::Tensor& h,
                                                          const at::Tensor& c) {
  const char* fn = "mona::nn::UnrolledLstmCell::step";
  Shared& s = *shared_;
  MONA_CHECK(s.next < static_cast<int64_t>(s.gates_in.size()), fn, ": all ", s.gates_in.size(),
             " steps the cell was made for are taken");
  MONA_CHECK(!inputs.empty(), fn, ": inputs: expected at least one piece of the step's input");
  std::vector<at::Tensor> pieces;
  int64_t D = 0;
  for (const at::Tensor& x : inputs) {
    detail::check_tensor(x, fn, "inputs", 2, "[B, D_k]");
    MONA_CHECK(x.size(0) == s.B && x.scalar_type() == s.xh.scalar_type(), fn, ": inputs: expected [B = ", s.B,
               ", D_k] of dtype ", s.xh.scalar_type(), ", got ", x.sizes(), " of ", x.scalar_type());
    D += x.size(1);
    pieces.push_back(x);
  }
  MONA_CHECK(D == s.D, fn, ": inputs: expected widths summing to D = ", s.D, " (w_ih's), got ", D);
  const at::Tensor ref = s.xh;
  const variable_list out = UnrolledStepFn::apply(at::TensorList(pieces), state_or_zeros(h, s.B, s.H, ref, fn, "h"),
                                                  state_or_zeros(c, s.B, s.H, ref, fn, "c"), s.gates_in[s.next], &s);
  ++s.next;
  return {out[0], out[1]};
}

int64_t UnrolledLstmCell::steps_taken() const { return shared_->next; }

}  // namespace mona::nn
