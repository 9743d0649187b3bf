#include "worker/json_file.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace worker {

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  const auto status =
      google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot encode ", message.GetTypeName(),
                     " as JSON: ", status.message().as_string()));
  }
  return json;
}

absl::Status WriteJsonFile(const google::protobuf::Message& message,
                           const std::string& path) {
  absl::StatusOr<std::string> json = ToJson(message);
  if (!json.ok()) return json.status();
  // Written whole, then renamed into place: a reader (or a process killed
  // mid-write) never sees half a file.
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::trunc);
  out << *json << "\n";
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", tmp));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

absl::Status ReadJsonFile(const std::string& path,
                          google::protobuf::Message* message) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream text;
  text << in.rdbuf();
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto status =
      google::protobuf::util::JsonStringToMessage(text.str(), message, options);
  if (!status.ok()) {
    return absl::DataLossError(absl::StrCat(path, ": not a ",
                                            message->GetTypeName(), " (",
                                            status.message().as_string(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace worker
