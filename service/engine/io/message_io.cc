#include "service/engine/io/message_io.h"

#include <zlib.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/json_util.h"

namespace placement::engine {
namespace {

bool IsGzip(absl::string_view data) {
  return data.size() >= 2 && static_cast<unsigned char>(data[0]) == 0x1f &&
         static_cast<unsigned char>(data[1]) == 0x8b;
}

absl::StatusOr<std::string> Gunzip(absl::string_view path, absl::string_view compressed) {
  z_stream stream{};
  // 16 + MAX_WBITS: expect a gzip header.
  if (inflateInit2(&stream, 16 + MAX_WBITS) != Z_OK) {
    return absl::InternalError("zlib inflateInit2 failed");
  }
  std::string out;
  out.reserve(compressed.size() * 4);
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(compressed.data()));
  stream.avail_in = static_cast<uInt>(compressed.size());
  char buffer[1 << 16];
  int code = Z_OK;
  while (code != Z_STREAM_END) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    code = inflate(&stream, Z_NO_FLUSH);
    if (code == Z_STREAM_END && stream.avail_in > 0 && IsGzip(absl::string_view(
            reinterpret_cast<const char*>(stream.next_in), stream.avail_in))) {
      // Concatenated gzip members (as `cat a.gz b.gz` makes): keep going.
      out.append(buffer, sizeof(buffer) - stream.avail_out);
      inflateReset(&stream);
      code = Z_OK;
      continue;
    }
    if (code != Z_OK && code != Z_STREAM_END) {
      inflateEnd(&stream);
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": corrupt gzip data (", stream.msg ? stream.msg : "zlib error", ")"));
    }
    out.append(buffer, sizeof(buffer) - stream.avail_out);
    if (code != Z_STREAM_END && stream.avail_in == 0 && stream.avail_out != 0) {
      inflateEnd(&stream);
      return absl::InvalidArgumentError(absl::StrCat(path, ": truncated gzip data"));
    }
  }
  inflateEnd(&stream);
  return out;
}

absl::StatusOr<std::string> Gzip(absl::string_view data) {
  z_stream stream{};
  if (deflateInit2(&stream, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 16 + MAX_WBITS, 8,
                   Z_DEFAULT_STRATEGY) != Z_OK) {
    return absl::InternalError("zlib deflateInit2 failed");
  }
  std::string out;
  out.resize(deflateBound(&stream, data.size()));
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
  stream.avail_in = static_cast<uInt>(data.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int code = deflate(&stream, Z_FINISH);
  deflateEnd(&stream);
  if (code != Z_STREAM_END) return absl::InternalError("zlib deflate failed");
  out.resize(stream.total_out);
  return out;
}

bool IsBinaryPath(absl::string_view path) {
  return absl::EndsWith(path, ".pb") || absl::EndsWith(path, ".pb.gz") || absl::EndsWith(path, ".binpb");
}

}  // namespace

absl::StatusOr<std::string> ReadFileBytes(absl::string_view path) {
  std::string data;
  if (path == "-") {
    data.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream file{std::string(path), std::ios::binary};
    if (!file) {
      return absl::NotFoundError(absl::StrCat(path, ": cannot open (", std::strerror(errno), ")"));
    }
    std::ostringstream content;
    content << file.rdbuf();
    data = std::move(content).str();
  }
  if (IsGzip(data)) return Gunzip(path, data);
  return data;
}

absl::Status WriteFileBytes(absl::string_view path, absl::string_view data) {
  if (path == "-") {
    std::cout.write(data.data(), static_cast<std::streamsize>(data.size()));
    std::cout.flush();
    return absl::OkStatus();
  }
  std::string compressed;
  if (absl::EndsWith(path, ".gz")) {
    absl::StatusOr<std::string> gz = Gzip(data);
    if (!gz.ok()) return gz.status();
    compressed = std::move(*gz);
    data = compressed;
  }
  std::ofstream file{std::string(path), std::ios::binary | std::ios::trunc};
  if (!file) {
    return absl::PermissionDeniedError(
        absl::StrCat(path, ": cannot write (", std::strerror(errno), ")"));
  }
  file.write(data.data(), static_cast<std::streamsize>(data.size()));
  if (!file.good()) return absl::DataLossError(absl::StrCat(path, ": write failed"));
  return absl::OkStatus();
}

absl::Status ReadMessageFile(absl::string_view path, google::protobuf::Message& message) {
  absl::StatusOr<std::string> data = ReadFileBytes(path);
  if (!data.ok()) return data.status();
  if (IsBinaryPath(path)) {
    if (!message.ParseFromString(*data)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": not a valid binary ", message.GetTypeName()));
    }
    return absl::OkStatus();
  }
  absl::Status status = JsonToMessage(*data, message);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", status.message()));
  }
  return absl::OkStatus();
}

absl::Status WriteMessageFile(const google::protobuf::Message& message, absl::string_view path) {
  if (IsBinaryPath(path)) {
    std::string bytes;
    if (!message.SerializeToString(&bytes)) {
      return absl::InternalError(absl::StrCat(path, ": serialization failed"));
    }
    return WriteFileBytes(path, bytes);
  }
  std::string json = MessageToJson(message);
  json.push_back('\n');
  return WriteFileBytes(path, json);
}

std::string MessageToJson(const google::protobuf::Message& message, bool compact) {
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = !compact;
  options.preserve_proto_field_names = true;
  // Print zeros and empty strings too: consumers get the same keys in every answer.
  options.always_print_primitive_fields = true;
  std::string json;
  // Printing a well-formed message cannot fail; an empty result would show it anyway.
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  return json;
}

absl::Status JsonToMessage(absl::string_view json, google::protobuf::Message& message) {
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &message, options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid ", message.GetTypeName(), " JSON: ", status.message().as_string()));
  }
  return absl::OkStatus();
}

}  // namespace placement::engine
