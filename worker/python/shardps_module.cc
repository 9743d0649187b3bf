// shardps._shardps: ps::Client for Python (the `shardps` package,
// worker/python/shardps/__init__.py, is its public face).
//
// Values travel through the buffer protocol: a pull writes into, and a push
// reads from, any C-contiguous float32 buffer (a NumPy array, a torch CPU
// tensor through .numpy()) in place; nothing is copied in Python. Every call
// into the servers releases the GIL, so other Python threads (a data loader,
// another client) run meanwhile. A failed call raises shardps.Error with the
// status code and the servers' message.
//
// Thread-safety: as ps::Client, every method may be called from any thread.
#include <malloc.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "google/protobuf/util/json_util.h"
#include "proto/shardps.pb.h"
#include "ps/client/client.h"

namespace py = pybind11;

namespace shardps_python {
namespace {

// A non-OK status as shardps.Error(code, code_name, message).
[[noreturn]] void Raise(const absl::Status& status) {
  py::object error = py::module_::import("shardps._errors").attr("Error");
  py::object instance = error(static_cast<int>(status.code()),
                              absl::StatusCodeToString(status.code()),
                              std::string(status.message()));
  PyErr_SetObject(error.ptr(), instance.ptr());
  throw py::error_already_set();
}

void Check(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

// `message` from its proto3 JSON (what json.dumps makes of a dict);
// INVALID_ARGUMENT naming `what` and the field otherwise.
template <typename Message>
Message FromJson(const std::string& json, const char* what) {
  Message message;
  if (json.empty()) return message;
  const auto parsed =
      google::protobuf::util::JsonStringToMessage(json, &message);
  if (!parsed.ok()) {
    Raise(absl::InvalidArgumentError(
        absl::StrCat(what, ": ", std::string(parsed.message()))));
  }
  return message;
}

// The float32 buffer behind `object` with exactly `n` values, C-contiguous,
// writable when `writable`; a TypeError or ValueError naming `name`
// otherwise.
py::buffer_info FloatBuffer(const py::object& object, uint64_t n, bool writable,
                            const char* name) {
  py::buffer_info info;
  try {
    info = py::reinterpret_borrow<py::buffer>(object).request(writable);
  } catch (const py::error_already_set&) {
    throw py::type_error(absl::StrCat(
        name, " must be a ", writable ? "writable " : "",
        "buffer of float32 (a NumPy array or torch tensor's .numpy())"));
  }
  if (info.format != py::format_descriptor<float>::format() ||
      info.itemsize != sizeof(float)) {
    throw py::type_error(
        absl::StrCat(name, " must hold float32, not '", info.format, "'"));
  }
  py::ssize_t stride = sizeof(float);
  for (py::ssize_t d = info.ndim - 1; d >= 0; --d) {
    if (info.shape[d] > 1 && info.strides[d] != stride) {
      throw py::value_error(
          absl::StrCat(name, " must be C-contiguous (use .copy())"));
    }
    stride *= info.shape[d];
  }
  if (static_cast<uint64_t>(info.size) != n) {
    throw py::value_error(absl::StrCat(name, " has ", info.size,
                                       " values; keys [begin, end) need ", n));
  }
  return info;
}

uint64_t RangeSize(uint64_t begin, uint64_t end) {
  if (end < begin) {
    throw py::value_error(
        absl::StrCat("end (", end, ") is before begin (", begin, ")"));
  }
  return end - begin;
}

class PyClient {
 public:
  PyClient(std::vector<std::string> server_addrs, std::string job,
           uint32_t worker, std::string auth_token, std::string tls_ca,
           std::string tls_cert, std::string tls_key, double timeout_seconds,
           double retry_seconds) {
    ps::ClientOptions o;
    o.server_addrs = std::move(server_addrs);
    o.job = std::move(job);
    o.worker = worker;
    o.tls = {std::move(tls_cert), std::move(tls_key), std::move(tls_ca)};
    o.rpc_timeout = absl::Seconds(timeout_seconds);
    o.retry_give_up = absl::Seconds(retry_seconds);
    o.auth_token = std::move(auth_token);
    absl::StatusOr<std::unique_ptr<ps::Client>> client =
        ps::Client::Connect(std::move(o));
    Check(client.status());
    client_ = *std::move(client);
  }

  int num_servers() const { return client_->num_servers(); }

  void WaitReady(double timeout_seconds) {
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = client_->WaitReady(absl::Seconds(timeout_seconds));
    }
    Check(s);
  }

  void CreateTable(const std::string& name, uint64_t num_params,
                   const std::string& optimizer, const std::string& init,
                   const std::string& consistency) {
    const ps::TableOptions table =
        Table(name, num_params, optimizer, init, consistency);
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = client_->CreateTable(table);
    }
    Check(s);
  }

  void OpenTable(const std::string& name, uint64_t num_params,
                 const std::string& consistency, double timeout_seconds) {
    const ps::TableOptions table = Table(name, num_params, "", "", consistency);
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = client_->OpenTable(table, absl::Seconds(timeout_seconds));
    }
    Check(s);
  }

  void Pull(const std::string& table, uint64_t begin, uint64_t end,
            const py::object& out, uint64_t clock) {
    const py::buffer_info values =
        FloatBuffer(out, RangeSize(begin, end), /*writable=*/true, "out");
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = client_->Pull(table, begin, end, static_cast<float*>(values.ptr),
                        clock);
    }
    Check(s);
  }

  void Push(const std::string& table, uint64_t begin, uint64_t end,
            const py::object& grad, uint64_t clock, float lr_scale) {
    const py::buffer_info gradient =
        FloatBuffer(grad, RangeSize(begin, end), /*writable=*/false, "grad");
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = client_->Push(table, begin, end,
                        static_cast<const float*>(gradient.ptr), clock,
                        lr_scale);
    }
    Check(s);
  }

  void PushPull(const std::string& table, uint64_t begin, uint64_t end,
                const py::object& grad, const py::object& out, uint64_t clock,
                float lr_scale) {
    const uint64_t n = RangeSize(begin, end);
    const py::buffer_info gradient =
        FloatBuffer(grad, n, /*writable=*/false, "grad");
    const py::buffer_info values =
        FloatBuffer(out, n, /*writable=*/true, "out");
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = client_->PushPull(table, begin, end,
                            static_cast<const float*>(gradient.ptr),
                            static_cast<float*>(values.ptr), clock, lr_scale);
    }
    Check(s);
  }

  // Each server's StatsResponse as proto3 JSON, in shard order.
  std::vector<std::string> Stats() {
    absl::StatusOr<std::vector<shardps::StatsResponse>> stats;
    {
      py::gil_scoped_release release;
      stats = client_->Stats();
    }
    Check(stats.status());
    std::vector<std::string> out;
    google::protobuf::util::JsonPrintOptions options;
    options.preserve_proto_field_names = true;
    for (const shardps::StatsResponse& s : *stats) {
      std::string json;
      const auto printed =
          google::protobuf::util::MessageToJsonString(s, &json, options);
      if (!printed.ok()) {
        Raise(absl::InternalError(std::string(printed.message())));
      }
      out.push_back(std::move(json));
    }
    return out;
  }

  uint64_t push_bytes() const { return client_->push_bytes(); }
  uint64_t pull_bytes() const { return client_->pull_bytes(); }

 private:
  static ps::TableOptions Table(const std::string& name, uint64_t num_params,
                                const std::string& optimizer,
                                const std::string& init,
                                const std::string& consistency) {
    ps::TableOptions t;
    t.name = name;
    t.num_params = num_params;
    t.optimizer = FromJson<shardps::OptimizerConfig>(optimizer, "optimizer");
    t.init = FromJson<shardps::InitConfig>(init, "init");
    t.consistency =
        FromJson<shardps::ConsistencyConfig>(consistency, "consistency");
    return t;
  }

  std::unique_ptr<ps::Client> client_;
};

}  // namespace
}  // namespace shardps_python

// How much freed heap glibc may keep before returning any to the kernel.
constexpr int kKeepFreedBytes = 1 << 30;

PYBIND11_MODULE(_shardps, m) {
  using shardps_python::PyClient;
  m.doc() = "ps::Client for Python; use the shardps package.";
  // gRPC receives into fresh heap blocks and frees them; in a Python
  // process glibc then returns the top of the heap to the kernel after every
  // large pull, and the next pull faults every page in again (a 40 MB pull
  // took 110 ms instead of 16). Freed memory stays with the process.
  mallopt(M_TRIM_THRESHOLD, kKeepFreedBytes);
  py::class_<PyClient>(m, "Client")
      .def(
          py::init<std::vector<std::string>, std::string, uint32_t, std::string,
                   std::string, std::string, std::string, double, double>(),
          py::arg("server_addrs"), py::arg("job"), py::arg("worker"),
          py::arg("auth_token"), py::arg("tls_ca"), py::arg("tls_cert"),
          py::arg("tls_key"), py::arg("timeout_seconds"),
          py::arg("retry_seconds"))
      .def_property_readonly("num_servers", &PyClient::num_servers)
      .def("wait_ready", &PyClient::WaitReady, py::arg("timeout_seconds"))
      .def("create_table", &PyClient::CreateTable, py::arg("name"),
           py::arg("num_params"), py::arg("optimizer"), py::arg("init"),
           py::arg("consistency"))
      .def("open_table", &PyClient::OpenTable, py::arg("name"),
           py::arg("num_params"), py::arg("consistency"),
           py::arg("timeout_seconds"))
      .def("pull", &PyClient::Pull, py::arg("table"), py::arg("begin"),
           py::arg("end"), py::arg("out"), py::arg("clock"))
      .def("push", &PyClient::Push, py::arg("table"), py::arg("begin"),
           py::arg("end"), py::arg("grad"), py::arg("clock"),
           py::arg("lr_scale"))
      .def("push_pull", &PyClient::PushPull, py::arg("table"), py::arg("begin"),
           py::arg("end"), py::arg("grad"), py::arg("out"), py::arg("clock"),
           py::arg("lr_scale"))
      .def("stats", &PyClient::Stats)
      .def_property_readonly("push_bytes", &PyClient::push_bytes)
      .def_property_readonly("pull_bytes", &PyClient::pull_bytes);
}
