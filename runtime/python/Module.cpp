//===- Module.cpp - the runtime as a Python module -------------------------===//
//
// `_fsdp_runtime`, which python/fsdp_opt imports as fsdp_opt.Runtime: a
// Session (fsdp/runtime/Session.h) driven from the user's own training
// loop. pybind11 as torch ships it, and torch's own conversions of tensors
// (libtorch_python), so a tensor crosses without a copy.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/Session.h"
#ifdef FSDP_RUNTIME_CUDA
#include "../lib/CudaHalf.h"
#endif

#include <torch/csrc/utils/pybind.h>

#include <pybind11/stl.h>

namespace py = pybind11;
using namespace fsdp::runtime;

namespace {

/// Runs `f` on the session; an error tells the other ranks (which stop
/// with it, as fsdp-run's do) before it reaches Python as RuntimeError.
template <typename F> auto guarded(Session &s, F f) {
  try {
    py::gil_scoped_release released;
    return f();
  } catch (const std::exception &e) {
    // When another rank failed first, its failure is the cause: say that,
    // as fsdp-run's ranks do.
    std::string cause = s.failureOfOthers();
    if (!cause.empty())
      throw std::runtime_error("rank " + std::to_string(s.rank()) +
                               " stops: " + cause);
    std::string message = e.what();
    s.fail(message);
    throw std::runtime_error(message);
  }
}

std::unique_ptr<Session> open(const std::string &plan, const std::string &model,
                              std::optional<uint64_t> seed,
                              const std::string &device,
                              const std::string &backend,
                              const std::string &resume) {
  RunOptions o;
  o.resume = resume;
  o.plan = plan;
  o.model = model;
  o.seed = seed;
  o.device = device;
  o.backend = backend;
  py::gil_scoped_release released;
  return std::make_unique<Session>(o);
}

} // namespace

PYBIND11_MODULE(_fsdp_runtime, m) {
  m.doc() = "fsdp-opt's runtime: one rank of a plan, driven step by step";
#ifdef FSDP_RUNTIME_CUDA
  // The CUDA half is linked in: torch has loaded CUDA's libraries already.
  fsdp::runtime::cuda::provide(fsdp::runtime::cuda::linkedHalf());
#endif
  py::class_<Session>(m, "Session")
      .def(py::init(&open), py::arg("plan"), py::arg("model"),
           py::arg("seed") = std::nullopt, py::arg("device") = "",
           py::arg("backend") = "", py::arg("resume") = "")
      .def("step",
           [](Session &s, const Batch &batch) {
             return guarded(s, [&] { return s.step(batch); });
           })
      .def("evaluate",
           [](Session &s, const Batch &batch) {
             return guarded(s, [&] { return s.evaluate(batch); });
           })
      .def("state_dict",
           [](Session &s) { return guarded(s, [&] { return s.stateDict(); }); })
      .def("save",
           [](Session &s, const std::string &path) {
             guarded(s, [&] { s.save(path); });
           })
      .def("checkpoint",
           [](Session &s, const std::string &dir, const std::string &type) {
             return guarded(s, [&] { return s.checkpoint(dir, type); });
           })
      // A wrong use of lr is this rank's error alone: the job goes on.
      .def_property(
          "lr",
          [](const Session &s) {
            try {
              return s.lr();
            } catch (const std::exception &e) {
              throw std::runtime_error(e.what());
            }
          },
          [](Session &s, double lr) {
            try {
              s.setLr(lr);
            } catch (const std::exception &e) {
              throw std::runtime_error(e.what());
            }
          })
      .def_property_readonly("rank", &Session::rank)
      .def_property_readonly("world_size", &Session::worldSize)
      .def_property_readonly("steps", &Session::steps)
      .def_property_readonly("step_ms", &Session::stepMs)
      .def_property_readonly("comm_wait_ms", &Session::commWaitMs)
      .def_property_readonly("peak_bytes", &Session::peakBytes);
}
