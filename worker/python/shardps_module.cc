// shardps._shardps: ps::Client for Python (the `shardps` package,
// worker/python/shardps/__init__.py, is its public face). A pull writes into,
// and a push reads from, any C-contiguous float32 buffer (NumPy array, torch
// CPU tensor) in place, through the buffer protocol; calls into the servers
// release the GIL; a failed call raises shardps.Error with the status code
// and the servers' message.
// Thread-safety: as ps::Client, every method may be called from any thread.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "google/protobuf/util/json_util.h"
#include "proto/shardps.pb.h"
#include "ps/base/program.h"
#include "ps/client/client.h"
#include "ps/obs/trace.h"
#include "ps/wire/row_partition.h"
#include "ps/wire/value_codec.h"

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
        "buffer of float32 (a NumPy array or a CPU torch tensor)"));
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

// The ids behind `object`: a C-contiguous buffer of 64-bit integers
// (uint64, or int64 as torch keeps indices, read as their bits); a
// TypeError or ValueError naming `name` otherwise.
py::buffer_info IdBuffer(const py::object& object, const char* name) {
  py::buffer_info info;
  try {
    info = py::reinterpret_borrow<py::buffer>(object).request();
  } catch (const py::error_already_set&) {
    throw py::type_error(absl::StrCat(
        name,
        " must be a buffer of 64-bit ids (a NumPy array or a CPU torch "
        "tensor)"));
  }
  const std::string& f = info.format;
  if (info.itemsize != 8 || (f != "Q" && f != "L" && f != "q" && f != "l")) {
    throw py::type_error(absl::StrCat(name, " must hold uint64 or int64, not '",
                                      info.format, "'"));
  }
  if (info.ndim > 1 ||
      (info.ndim == 1 && info.shape[0] > 1 && info.strides[0] != 8)) {
    throw py::value_error(
        absl::StrCat(name, " must be one contiguous row of ids"));
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

// The spans a Python worker records of its own (the tracer keeps names by
// pointer, so they are these literals).
constexpr const char* kSpanNames[] = {"step", "read",      "compute",
                                      "pull", "push",      "push_pull",
                                      "wait", "broadcast", "evaluate"};

class PyClient {
 public:
  // Where the servers are, and how to reach them (ps::ClientOptions).
  struct Reach {
    std::vector<std::string> server_addrs;
    std::string etcd;
    int num_servers = 0;
    std::string job;
    uint32_t worker = 0;
    std::string compression;
    bool shared_memory = true;
  };

  PyClient(Reach reach, std::string auth_token, std::string tls_ca,
           std::string tls_cert, std::string tls_key, double timeout_seconds,
           double retry_seconds, std::string trace, std::string trace_name) {
    ps::ClientOptions o;
    o.server_addrs = std::move(reach.server_addrs);
    o.etcd = std::move(reach.etcd);
    o.num_shards = reach.num_servers;
    o.job = std::move(reach.job);
    o.worker = reach.worker;
    absl::StatusOr<ps::WireEncodings> encodings =
        ps::EncodingsFor(reach.compression);
    if (!encodings.ok()) {
      Raise(absl::InvalidArgumentError(
          absl::StrCat("compression '", reach.compression,
                       "': ", encodings.status().message())));
    }
    o.pull_encoding = encodings->pull;
    o.push_encoding = encodings->push;
    o.shared_memory = reach.shared_memory;
    o.tls = {std::move(tls_cert), std::move(tls_key), std::move(tls_ca)};
    o.rpc_timeout = absl::Seconds(timeout_seconds);
    o.retry_give_up = absl::Seconds(retry_seconds);
    o.auth_token = std::move(auth_token);
    if (!trace.empty()) {
      absl::StatusOr<std::unique_ptr<ps::Tracer>> tracer =
          ps::Tracer::Open({trace, trace_name});
      Check(tracer.status());
      tracer_ = *std::move(tracer);
      o.tracer = tracer_.get();
    }
    absl::StatusOr<std::unique_ptr<ps::Client>> client =
        ps::Client::Connect(std::move(o));
    Check(client.status());
    client_ = *std::move(client);
  }

  int num_servers() const { return Live().num_servers(); }

  // Ends the client, then writes the trace; later calls raise.
  void Close() {
    py::gil_scoped_release release;
    client_.reset();
    tracer_.reset();
  }

  // A span of the calling thread in the trace (none without one): `name`
  // one of kSpanNames, times in seconds since the epoch (time.time()).
  void RecordSpan(const std::string& name, double start, double end) {
    const char* literal = nullptr;
    for (const char* known : kSpanNames) {
      if (name == known) literal = known;
    }
    if (literal == nullptr) {
      throw py::value_error(absl::StrCat("span '", name, "' is not one of ",
                                         absl::StrJoin(kSpanNames, ", ")));
    }
    if (tracer_ == nullptr) return;
    tracer_->Record(literal, "worker", absl::FromUnixMicros(start * 1e6),
                    absl::FromUnixMicros(end * 1e6));
  }

  void WaitReady(double timeout_seconds) {
    ps::Client& client = Live();
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = client.WaitReady(absl::Seconds(timeout_seconds));
    }
    Check(s);
  }

  void CreateTable(const std::string& name, uint64_t num_params,
                   const std::string& optimizer, const std::string& init,
                   const std::string& consistency) {
    const ps::TableOptions table =
        Table(name, num_params, optimizer, init, consistency);
    ps::Client& client = Live();
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = client.CreateTable(table);
    }
    Check(s);
  }

  void OpenTable(const std::string& name, uint64_t num_params,
                 const std::string& consistency, double timeout_seconds) {
    const ps::TableOptions table = Table(name, num_params, "", "", consistency);
    ps::Client& client = Live();
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = client.OpenTable(table, absl::Seconds(timeout_seconds));
    }
    Check(s);
  }

  void Pull(const std::string& table, uint64_t begin, uint64_t end,
            const py::object& out, uint64_t clock) {
    const py::buffer_info values =
        FloatBuffer(out, RangeSize(begin, end), /*writable=*/true, "out");
    ps::Client& client = Live();
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = client.Pull(table, begin, end, static_cast<float*>(values.ptr),
                      clock);
    }
    Check(s);
  }

  void Push(const std::string& table, uint64_t begin, uint64_t end,
            const py::object& grad, uint64_t clock, float lr_scale) {
    const py::buffer_info gradient =
        FloatBuffer(grad, RangeSize(begin, end), /*writable=*/false, "grad");
    ps::Client& client = Live();
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = client.Push(table, begin, end,
                      static_cast<const float*>(gradient.ptr), clock, lr_scale);
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
    ps::Client& client = Live();
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = client.PushPull(table, begin, end,
                          static_cast<const float*>(gradient.ptr),
                          static_cast<float*>(values.ptr), clock, lr_scale);
    }
    Check(s);
  }

  // Each server's StatsResponse as proto3 JSON, in shard order.
  std::vector<std::string> Stats() {
    ps::Client& client = Live();
    absl::StatusOr<std::vector<shardps::StatsResponse>> stats;
    {
      py::gil_scoped_release release;
      stats = client.Stats();
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

  // Sparse tables (ps/client/client.h CreateRowTable ...).
  void CreateRowTable(const std::string& name, uint32_t dim,
                      uint64_t max_rows_per_shard, const std::string& optimizer,
                      const std::string& init, const std::string& sharding,
                      uint64_t id_space) {
    absl::StatusOr<shardps::RowSharding> parsed =
        ps::ParseRowSharding(sharding);
    if (!parsed.ok()) {
      throw py::value_error(
          absl::StrCat("sharding ", parsed.status().message()));
    }
    ps::RowTableOptions t;
    t.name = name;
    t.dim = dim;
    t.max_rows_per_shard = max_rows_per_shard;
    t.optimizer = FromJson<shardps::OptimizerConfig>(optimizer, "optimizer");
    t.init = FromJson<shardps::InitConfig>(init, "init");
    t.sharding = *parsed;
    t.id_space = id_space;
    ps::Client& client = Live();
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = client.CreateRowTable(t);
    }
    Check(s);
  }

  void OpenRowTable(const std::string& name) {
    ps::Client& client = Live();
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = client.OpenRowTable(name);
    }
    Check(s);
  }

  void PullRows(const std::string& table, const py::object& ids,
                const py::object& out, bool create) {
    const py::buffer_info id_buffer = IdBuffer(ids, "ids");
    const uint64_t n = static_cast<uint64_t>(id_buffer.size);
    const py::buffer_info values =
        FloatBuffer(out, n * Dim(table), /*writable=*/true, "out");
    ps::Client& client = Live();
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = client.PullRows(
          table, absl::MakeConstSpan(static_cast<uint64_t*>(id_buffer.ptr), n),
          static_cast<float*>(values.ptr), create);
    }
    Check(s);
  }

  void PushRows(const std::string& table, const py::object& ids,
                const py::object& grads, float lr_scale) {
    const py::buffer_info id_buffer = IdBuffer(ids, "ids");
    const uint64_t n = static_cast<uint64_t>(id_buffer.size);
    const py::buffer_info gradients =
        FloatBuffer(grads, n * Dim(table), /*writable=*/false, "grads");
    ps::Client& client = Live();
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = client.PushRows(
          table, absl::MakeConstSpan(static_cast<uint64_t*>(id_buffer.ptr), n),
          static_cast<const float*>(gradients.ptr), lr_scale);
    }
    Check(s);
  }

  uint32_t Dim(const std::string& table) {
    absl::StatusOr<uint32_t> dim = Live().RowDim(table);
    Check(dim.status());
    return *dim;
  }

  uint64_t push_bytes() const {
    return Live().push_bytes() + Live().memory_push_bytes();
  }
  uint64_t pull_bytes() const {
    return Live().pull_bytes() + Live().memory_pull_bytes();
  }

  void Assign(const std::string& table, uint64_t begin, uint64_t end,
              const py::object& values) {
    const py::buffer_info buffer = FloatBuffer(values, RangeSize(begin, end),
                                               /*writable=*/false, "values");
    ps::Client& client = Live();
    absl::Status s;
    {
      py::gil_scoped_release release;
      s = client.Assign(table, begin, end,
                        static_cast<const float*>(buffer.ptr));
    }
    Check(s);
  }

 private:
  ps::Client& Live() const {
    if (client_ == nullptr) {
      Raise(absl::FailedPreconditionError("the client was closed"));
    }
    return *client_;
  }

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

  // The tracer outlives the client, which records into it.
  std::unique_ptr<ps::Tracer> tracer_;
  std::unique_ptr<ps::Client> client_;
};

}  // namespace
}  // namespace shardps_python

PYBIND11_MODULE(_shardps, m) {
  using shardps_python::PyClient;
  m.doc() = "ps::Client for Python; use the shardps package.";
  // As every shardps binary: a pull's buffers reused warm, not faulted in
  // again (a 40 MB pull took 110 ms instead of 16), which also keeps
  // torch's activations of a training step off fresh pages.
  ps::TuneProcessForBulkTransfers();
  py::class_<PyClient::Reach>(m, "Reach")
      .def(py::init<>())
      .def_readwrite("server_addrs", &PyClient::Reach::server_addrs)
      .def_readwrite("etcd", &PyClient::Reach::etcd)
      .def_readwrite("num_servers", &PyClient::Reach::num_servers)
      .def_readwrite("job", &PyClient::Reach::job)
      .def_readwrite("worker", &PyClient::Reach::worker)
      .def_readwrite("compression", &PyClient::Reach::compression)
      .def_readwrite("shared_memory", &PyClient::Reach::shared_memory);
  py::class_<PyClient>(m, "Client")
      .def(py::init<PyClient::Reach, std::string, std::string, std::string,
                    std::string, double, double, std::string, std::string>(),
           py::arg("reach"), py::arg("auth_token"), py::arg("tls_ca"),
           py::arg("tls_cert"), py::arg("tls_key"), py::arg("timeout_seconds"),
           py::arg("retry_seconds"), py::arg("trace"), py::arg("trace_name"))
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
      .def("assign", &PyClient::Assign, py::arg("table"), py::arg("begin"),
           py::arg("end"), py::arg("values"))
      .def("create_row_table", &PyClient::CreateRowTable, py::arg("name"),
           py::arg("dim"), py::arg("max_rows_per_shard"), py::arg("optimizer"),
           py::arg("init"), py::arg("sharding"), py::arg("id_space"))
      .def("open_row_table", &PyClient::OpenRowTable, py::arg("name"))
      .def("pull_rows", &PyClient::PullRows, py::arg("table"), py::arg("ids"),
           py::arg("out"), py::arg("create"))
      .def("push_rows", &PyClient::PushRows, py::arg("table"), py::arg("ids"),
           py::arg("grads"), py::arg("lr_scale"))
      .def("row_dim", &PyClient::Dim, py::arg("table"))
      .def("record_span", &PyClient::RecordSpan, py::arg("name"),
           py::arg("start"), py::arg("end"))
      .def("close", &PyClient::Close)
      .def("stats", &PyClient::Stats)
      .def_property_readonly("push_bytes", &PyClient::push_bytes)
      .def_property_readonly("pull_bytes", &PyClient::pull_bytes);
}
