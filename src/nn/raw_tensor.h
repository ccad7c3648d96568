// Private to src/nn: reading and reusing small CPU tensors in the online (hard) step
// without the tensor API's per-call checks. A hard step costs about 100-250 ns, and
// data_ptr(), item() and size() each pay dispatch or out-of-line checks that add up to a
// sizeable part of that. Every function here first establishes, from inline field reads
// only, that the tensor is a strided CPU tensor with a storage of its own; when it is
// not, it answers "no" and the caller takes the ordinary tensor-API path.
#pragma once

#include <ATen/core/Tensor.h>

namespace mona::nn::detail {

/// The TensorImpl of `t` when `t` is defined, on the CPU, strided and backed by a storage
/// (what data_ptr() requires); else null.
inline const c10::TensorImpl* dense_cpu_impl(const at::Tensor& t) {
  if (!t.defined()) return nullptr;
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  if (!impl->is_cpu() || impl->layout() != at::kStrided ||
      impl->unsafe_storage().unsafeGetStorageImpl() == nullptr) {
    return nullptr;
  }
  return impl;
}

/// The address of the first element of `t` (what data_ptr() returns) when dense_cpu_impl
/// accepts `t`; else null.
inline const void* dense_cpu_data(const at::Tensor& t) {
  const c10::TensorImpl* impl = dense_cpu_impl(t);
  if (impl == nullptr) return nullptr;
  return static_cast<const char*>(impl->unsafe_storage().data()) +
         impl->storage_offset() * static_cast<int64_t>(impl->itemsize());
}

/// The value of a one-element float or double tensor (a scalar parameter such as g or r):
/// read in place when dense_cpu_impl accepts it, else through item().
inline double scalar_value(const at::Tensor& t) {
  if (const c10::TensorImpl* impl = dense_cpu_impl(t); impl != nullptr && impl->numel() == 1) {
    if (impl->dtype() == caffe2::TypeMeta::Make<double>()) return *impl->unsafe_data<double>();
    if (impl->dtype() == caffe2::TypeMeta::Make<float>()) return *impl->unsafe_data<float>();
  }
  return t.item<double>();
}

/// Whether a hard step may write its output into `t` in place (the out= convention): `t`
/// is a dense CPU vector of n values of `dtype` starting at its storage's first element,
/// and neither the tensor nor its storage is referred to by anything else. The last
/// condition is what makes the write invisible to everyone else: a context the caller
/// kept, a view of it, or a tensor an autograd graph saved all hold a reference to the
/// storage, so none of them is ever overwritten.
inline bool reusable_output(const at::Tensor& t, int64_t n, at::ScalarType dtype) {
  const c10::TensorImpl* impl = dense_cpu_impl(t);
  return impl != nullptr && impl->dim() == 1 && impl->sizes()[0] == n &&
         impl->dtype() == c10::scalarTypeToTypeMeta(dtype) && impl->storage_offset() == 0 &&
         t.use_count() == 1 && impl->unsafe_storage().use_count() == 1;
}

}  // namespace mona::nn::detail
