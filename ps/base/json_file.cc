#include "ps/base/json_file.h"

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"
#include "ps/base/atomic_file.h"
#include "ps/base/file_io.h"

namespace ps {

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
  // A reader (or a process killed mid-write) never sees half a file.
  return ps::WriteFileAtomically(path, *json + "\n");
}

absl::Status ReadJsonFile(const std::string& path,
                          google::protobuf::Message* message) {
  absl::StatusOr<std::string> text = ReadFileToString(path);
  if (!text.ok()) return text.status();
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto status =
      google::protobuf::util::JsonStringToMessage(*text, message, options);
  if (!status.ok()) {
    return absl::DataLossError(absl::StrCat(path, ": not a ",
                                            message->GetTypeName(), " (",
                                            status.message().as_string(), ")"));
  }
  return absl::OkStatus();
}

}  // namespace ps
