#include "experiments/sim/inputs.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace sim {

absl::StatusOr<double> ParseRate(absl::string_view rate) {
  absl::string_view number = rate;
  if (!absl::ConsumeSuffix(&number, "bit")) {
    return absl::InvalidArgumentError(
        absl::StrCat("link rate \"", rate, "\" must end in bit (100mbit)"));
  }
  double scale = 1;
  if (absl::ConsumeSuffix(&number, "k")) {
    scale = 1e3;
  } else if (absl::ConsumeSuffix(&number, "m")) {
    scale = 1e6;
  } else if (absl::ConsumeSuffix(&number, "g")) {
    scale = 1e9;
  }
  double value = 0;
  if (!absl::SimpleAtod(number, &value) || !(value > 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "link rate \"", rate, "\" is not a positive number of bits/s"));
  }
  return value * scale / 8;
}

absl::StatusOr<std::vector<LayerTiming>> ParseLayers(absl::string_view text) {
  std::vector<LayerTiming> layers;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    const std::vector<absl::string_view> parts = absl::StrSplit(item, ':');
    double params = 0;
    LayerTiming layer;
    if (parts.size() != 3 || !absl::SimpleAtod(parts[0], &params) ||
        !absl::SimpleAtod(parts[1], &layer.forward_at) ||
        !absl::SimpleAtod(parts[2], &layer.gradient_at)) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer ", layers.size(), " \"", item,
                       "\" is not PARAMS:FORWARD_AT:GRADIENT_AT"));
    }
    layer.bytes = 4 * params;
    layers.push_back(layer);
  }
  return layers;
}

absl::StatusOr<Calibration> ParseCalibration(absl::string_view text,
                                             absl::string_view name) {
  Calibration c;
  std::map<std::string, double*> fields = {
      {"startup_wait", &c.startup_wait},
      {"startup_cpu", &c.startup_cpu},
      {"startup_cpu_per_server", &c.startup_cpu_per_server},
      {"startup_threads", &c.startup_threads},
      {"launch_cpu", &c.launch_cpu},
      {"storage_efficiency", &c.storage_efficiency},
      {"read_cpu_per_byte", &c.read_cpu_per_byte},
      {"pull_efficiency", &c.pull_efficiency},
      {"push_efficiency", &c.push_efficiency},
      {"pull_delay", &c.pull_delay},
      {"push_delay", &c.push_delay},
      {"call_cpu", &c.call_cpu},
      {"client_cpu_per_byte", &c.client_cpu_per_byte},
      {"server_cpu_per_byte", &c.server_cpu_per_byte},
      {"wire_cpu_per_byte", &c.wire_cpu_per_byte},
      {"transfer_cv", &c.transfer_cv},
      {"queued_push_bytes", &c.queued_push_bytes},
  };
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    std::vector<absl::string_view> parts =
        absl::StrSplit(line, ' ', absl::SkipEmpty());
    const std::string where = absl::StrCat(name, ":", line_number, ": ");
    if (parts.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "expected \"key value\", got \"", line, "\""));
    }
    auto field = fields.find(std::string(parts[0]));
    if (field == fields.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "unknown or repeated key \"", parts[0], "\""));
    }
    if (!absl::SimpleAtod(parts[1], field->second)) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, parts[0], ": \"", parts[1], "\" is not a number"));
    }
    fields.erase(field);
  }
  if (!fields.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": missing key \"", fields.begin()->first, "\""));
  }
  return c;
}

absl::StatusOr<Calibration> ReadCalibration(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::NotFoundError(
        absl::StrCat("calibration file ", path, ": ", std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  return ParseCalibration(text.str(), path);
}

}  // namespace sim
