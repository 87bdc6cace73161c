// Reads a torch.Tensor's data pointer, sizes, strides, dtype, device and autograd state from its at::Tensor in
// ~35 ns, instead of five Python attribute calls (~500 ns). Built only when Debian's libtorch-dev
// headers are present, loaded by pypto_pro._C with dlopen once torch is imported; without it the
// launch path reads the same attributes through Python.
#include <Python.h>
#include <ATen/core/grad_mode.h>
#include <torch/csrc/autograd/python_variable.h>

#include <cstdint>

extern "C" __attribute__((visibility("default"))) int pypto_torch_read_v2(PyObject* obj, uint64_t* data, int* ndim,
                                                                       int64_t* shape, int64_t* strides,
                                                                       int max_rank, int* dtype, int* flags) {
  // flags: 1 = on the CPU, 2 = requires grad while grad mode is on, 4 = (with 2) a leaf.
  if (!THPVariable_Check(obj)) return 0;
  const at::Tensor& t = THPVariable_Unpack(obj);
  if (!t.defined()) return 0;
  int rank = int(t.dim());
  *ndim = rank;
  if (rank > max_rank) return 1;  // the caller reports the rank
  auto sizes = t.sizes();
  auto steps = t.strides();
  for (int i = 0; i < rank; ++i) {
    shape[i] = sizes[i];
    strides[i] = steps[i];
  }
  *dtype = int(t.scalar_type());
  const bool on_cpu = t.is_cpu();
  *flags = 0;
  *data = 0;
  if (t.requires_grad() && at::GradMode::is_enabled()) *flags |= t.is_leaf() ? 6 : 2;
  if (on_cpu) {
    try {  // c10 errors must not cross this C boundary
      *data = reinterpret_cast<uint64_t>(t.data_ptr());
      *flags |= 1;
    } catch (...) {
    }
  }
  return 1;
}

// c10::ScalarType codes, so the caller needs no torch headers.
extern "C" __attribute__((visibility("default"))) int pypto_torch_dtype_code(const char* name) {
  for (auto [n, code] : {std::pair{"float16", c10::ScalarType::Half}, {"bfloat16", c10::ScalarType::BFloat16},
                         {"float32", c10::ScalarType::Float}, {"int8", c10::ScalarType::Char},
                         {"int16", c10::ScalarType::Short}, {"int32", c10::ScalarType::Int},
                         {"int64", c10::ScalarType::Long}, {"uint8", c10::ScalarType::Byte},
                         {"bool", c10::ScalarType::Bool}}) {
    if (std::string_view(n) == name) return int(code);
  }
  return -1;
}
