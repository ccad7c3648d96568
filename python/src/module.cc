// python/src/module.cc: the extension module mona._C. Loading it registers the operators of
// ops.cc (torch.ops.mona.*, static registration); this file adds what is not an operator:
// the streaming Recognizer over a checkpoint written by `mona train`, and the translation
// of mona's exceptions.
//
// Exceptions (include/mona/core/error.h): mona::ArgumentError -> mona.ArgumentError, a
// subclass of ValueError; mona::DataError -> mona.DataError, a subclass of both OSError and
// RuntimeError (a file that cannot be read, or one whose contents are wrong). The message is
// mona's, unchanged. Other C++ exceptions follow pybind11's defaults (RuntimeError).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <torch/csrc/utils/pybind.h>  // at::Tensor <-> torch.Tensor

#include <torch/autograd.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "mona/core/error.h"
#include "mona/nn/attention.h"
#include "mona/nn/functional.h"
#include "mona/nn/threads.h"
#include "mona/stream/stream.h"
#include "mona/train/trainer.h"

namespace py = pybind11;

namespace mona::python {
namespace {

// A trained model and the Recognizer over it (the Recognizer holds the model).
struct PyRecognizer {
  PyRecognizer(const std::string& checkpoint, int64_t beam)
      : trained(train::TrainedModel::load(checkpoint)) {
    search = trained.config.decode;
    if (beam >= 0) search.beam = beam;
    search.validate();
    recognizer = std::make_unique<stream::Recognizer>(trained.model, search);
  }
  train::TrainedModel trained;
  nn::SearchOptions search;  // the checkpoint's decode options, beam as asked
  std::unique_ptr<stream::Recognizer> recognizer;
};

std::vector<std::string> symbols(const data::Vocabulary& v) {
  std::vector<std::string> out;
  for (int64_t i = 0; i < v.size(); ++i) out.push_back(v.symbol(i));
  return out;
}

// Mono samples for accept_waveform: a 1-d float tensor, as contiguous float32 (a copy only
// when it is not that already). Throws mona::ArgumentError otherwise.
at::Tensor waveform(const at::Tensor& samples) {
  MONA_CHECK(samples.defined() && samples.dim() == 1 && samples.device().is_cpu() &&
                 at::isFloatingType(samples.scalar_type()),
             "Recognizer.accept_waveform: samples: expected a 1-d CPU float tensor of mono "
             "samples in [-1, 1], got ", samples.defined() ? samples.toString() : "undefined",
             " ", samples.defined() ? samples.sizes() : at::IntArrayRef{});
  return samples.to(at::kFloat).contiguous();
}

}  // namespace
}  // namespace mona::python

PYBIND11_MODULE(_C, m) {
  using mona::python::PyRecognizer;
  using mona::stream::Stream;
  using mona::stream::StreamResult;
  m.doc() = "mona's compiled core: torch.ops.mona.* operators and the streaming Recognizer";

  static py::exception<mona::ArgumentError> argument_error(m, "ArgumentError", PyExc_ValueError);
  static py::exception<mona::DataError> data_error(
      m, "DataError", py::make_tuple(py::handle(PyExc_OSError), py::handle(PyExc_RuntimeError)));
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const mona::ArgumentError& e) {
      PyErr_SetString(argument_error.ptr(), e.what());
    } catch (const mona::DataError& e) {
      PyErr_SetString(data_error.ptr(), e.what());
    }
  });

  // The C++ call that bench/python/bench_alignment.py compares the Python call with, in the
  // same process: mona::nn::monotonic_alignment forward and torch::autograd::grad backward
  // (as bench/train.cc times it), `reps` times; returns the seconds of each.
  m.def("_time_monotonic_alignment_cpp",
        [](const at::Tensor& p, const at::Tensor& grad, int64_t reps) {
          std::vector<double> seconds;
          for (int64_t r = 0; r < reps; ++r) {
            const auto t0 = std::chrono::steady_clock::now();
            const at::Tensor alpha = mona::nn::monotonic_alignment(p);
            const auto g = torch::autograd::grad({alpha}, {p}, {grad});
            seconds.push_back(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
          }
          return seconds;
        },
        py::arg("p"), py::arg("grad"), py::arg("reps"), py::call_guard<py::gil_scoped_release>());

  m.def("use_best_blas_kernels", &mona::nn::use_best_blas_kernels,
        "OpenBLAS's kernel family for PyTorch's matrix products in this process, after making OpenBLAS\n"
        "pick again by the CPU's vector units (SkylakeX: AVX-512, Haswell: AVX2 and FMA) where it fell\n"
        "back to its SSE3 family Prescott on a CPU model it does not know (Debian's OpenBLAS 0.3.21\n"
        "on Intel Emerald Rapids, for one) and OPENBLAS_CORETYPE is not set; mona's C++ programs do\n"
        "this at start (include/mona/nn/threads.h). Call it before the first matrix product, while\n"
        "no other thread runs one. Returns the family's name ('SkylakeX', 'Haswell', ...), or ''\n"
        "when PyTorch's BLAS is not OpenBLAS.");

  // The defaults of the attention modules' options, from the C++ structs (AttentionOptions,
  // GmmAttentionOptions; include/mona/nn/attention.h), so that mona.nn's modules default to
  // what mona's own models do without a second copy of the values.
  {
    const mona::nn::AttentionOptions a;
    const mona::nn::GmmAttentionOptions& g = a.gmm;
    py::dict d;
    d["init_r"] = a.init_r;
    d["noise_std"] = a.noise_std;
    d["chunk_size"] = a.chunk_size;
    d["num_heads"] = g.num_heads;
    d["window_radius"] = g.window_radius;
    d["window_width"] = g.window_width;
    d["max_step"] = g.max_step;
    d["min_variance"] = g.min_variance;
    d["max_variance"] = g.max_variance;
    d["init_step_bias"] = g.init_step_bias;
    m.attr("attention_defaults") = d;
  }

  // mona.nn's modules check their options with the C++ structs' own checks
  // (AttentionOptions::validate, GmmAttentionOptions::validate): one set of rules.
  m.def(
      "check_attention_options",
      [](const std::string& who, const py::dict& options) {
        mona::nn::AttentionOptions a;
        mona::nn::GmmAttentionOptions& g = a.gmm;
        const std::map<std::string, int64_t*> integers = {
            {"query_dim", &a.query_dim}, {"memory_dim", &a.memory_dim}, {"attention_dim", &a.attention_dim},
            {"chunk_size", &a.chunk_size}, {"num_heads", &g.num_heads}, {"window_width", &g.window_width}};
        const std::map<std::string, double*> reals = {
            {"init_r", &a.init_r},           {"noise_std", &a.noise_std},       {"window_radius", &g.window_radius},
            {"max_step", &g.max_step},       {"min_variance", &g.min_variance}, {"max_variance", &g.max_variance},
            {"init_step_bias", &g.init_step_bias}};
        for (const auto& [key, value] : options) {
          const std::string name = key.cast<std::string>();
          if (auto i = integers.find(name); i != integers.end()) {
            *i->second = value.cast<int64_t>();
          } else if (auto r = reals.find(name); r != reals.end()) {
            *r->second = value.cast<double>();
          } else {
            throw mona::ArgumentError(who + ": no attention option called " + name);
          }
        }
        a.validate(who.c_str());
      },
      py::arg("who"), py::arg("options"),
      "Raises mona.ArgumentError naming `who`, the option and its value unless the options\n"
      "(a dict: query_dim, memory_dim, attention_dim, chunk_size, num_heads and window_width as\n"
      "ints; init_r, noise_std, window_radius, max_step, min_variance, max_variance and\n"
      "init_step_bias as floats; the rest keep their defaults) pass the C++ AttentionOptions'\n"
      "checks (include/mona/nn/attention.h).");

  py::class_<StreamResult>(m, "StreamResult")
      .def_readonly("token_ids", &StreamResult::tokens)
      .def_readonly("memory_positions", &StreamResult::memory_positions)
      .def_readonly("input_positions", &StreamResult::input_positions)
      .def_readonly("times_ms", &StreamResult::times_ms)
      .def_readonly("score", &StreamResult::score)
      .def_readonly("final", &StreamResult::final);

  py::class_<Stream, std::unique_ptr<Stream>>(m, "Stream")
      .def_property_readonly("inputs_received", &Stream::inputs_received)
      .def_property_readonly("input_finished", &Stream::input_finished)
      .def_property_readonly("memory_size", &Stream::memory_size)
      .def_property_readonly("memory_held", &Stream::memory_held);

  // Decoding calls release the GIL: they touch no Python object, so streams of one
  // Recognizer can be decoded from several Python threads (one thread per stream).
  using release = py::call_guard<py::gil_scoped_release>;
  py::class_<PyRecognizer>(m, "Recognizer")
      .def(py::init<const std::string&, int64_t>(), py::arg("checkpoint"), py::arg("beam") = -1)
      .def("create_stream", [](const PyRecognizer& r) { return r.recognizer->create_stream(); },
           py::keep_alive<0, 1>())
      .def("accept", [](const PyRecognizer& r, Stream& s, const at::Tensor& inputs) {
             r.recognizer->accept(s, inputs);
           }, py::arg("stream"), py::arg("inputs"), release())
      .def("accept_waveform",
           [](const PyRecognizer& r, Stream& s, const at::Tensor& samples, int sample_rate) {
             const at::Tensor x = mona::python::waveform(samples);
             r.recognizer->accept_waveform(s, x.data_ptr<float>(), static_cast<size_t>(x.numel()),
                                           sample_rate);
           }, py::arg("stream"), py::arg("samples"), py::arg("sample_rate"), release())
      .def("recognize_waveform",
           [](const PyRecognizer& r, const at::Tensor& samples, int sample_rate) {
             const at::Tensor x = mona::python::waveform(samples);
             const float* v = x.data_ptr<float>();
             return r.recognizer->recognize_waveform(std::vector<float>(v, v + x.numel()),
                                                     sample_rate);
           }, py::arg("samples"), py::arg("sample_rate"), release())
      .def("decode_streams", [](const PyRecognizer& r, const std::vector<Stream*>& streams) {
             r.recognizer->decode_streams(streams);
           }, py::arg("streams"), release())
      .def_property_readonly("takes_audio", [](const PyRecognizer& r) {
             return r.recognizer->takes_audio();
           })
      .def("encode_input", [](const PyRecognizer& r, const std::vector<std::string>& tokens) {
             return r.trained.encode_input(tokens);
           }, py::arg("symbols"))
      .def("decode_output", [](const PyRecognizer& r, const std::vector<int64_t>& ids) {
             return r.trained.decode_output(ids);
           }, py::arg("ids"))
      .def("input_finished", [](const PyRecognizer& r, Stream& s) { r.recognizer->input_finished(s); },
           py::arg("stream"), release())
      .def("is_ready", [](const PyRecognizer& r, const Stream& s) { return r.recognizer->is_ready(s); },
           py::arg("stream"), release())
      .def("decode", [](const PyRecognizer& r, Stream& s) { r.recognizer->decode(s); }, py::arg("stream"),
           release())
      .def("result", [](const PyRecognizer& r, const Stream& s) { return r.recognizer->result(s); },
           py::arg("stream"), release())
      .def("reset", [](const PyRecognizer& r, Stream& s) { r.recognizer->reset(s); }, py::arg("stream"), release())
      .def("recognize", [](const PyRecognizer& r, const at::Tensor& inputs) {
             return r.recognizer->recognize(inputs);
           }, py::arg("inputs"), release())
      .def_property_readonly("step", [](const PyRecognizer& r) { return r.trained.step; })
      .def_property_readonly("beam", [](const PyRecognizer& r) { return r.search.beam; })
      .def_property_readonly("input_symbols", [](const PyRecognizer& r) {
             return mona::python::symbols(r.trained.input_vocab);
           })
      .def_property_readonly("output_symbols", [](const PyRecognizer& r) {
             return mona::python::symbols(r.trained.output_vocab);
           });
}
