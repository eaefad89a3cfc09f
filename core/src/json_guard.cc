#include "json_guard.h"

#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace refit::json_fields {
namespace {

// One open array or object, and where the parse is inside it.
struct Frame {
  bool object = false;
  std::set<std::string> keys;  // seen so far, objects only
  std::string key;             // the current key, objects only
  std::size_t index = 0;       // the current element, arrays only
};

// nlohmann's SAX events: every value is checked where it opens, nothing is built.
class Guard : public nlohmann::json_sax<Json> {
 public:
  explicit Guard(std::string_view what) : what_(what) {}

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t&) override { return value(); }
  bool string(string_t&) override { return value(); }
  bool binary(binary_t&) override { return value(); }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& key) override {
    frames_.back().key = key;
    if (!frames_.back().keys.insert(key).second)
      return refuse(invalid(fmt::format("{}: {}: key appears twice", what_, path())));
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    // Syntax, and numbers beyond double range such as 1e309; what() is "[json.exception.
    // parse_error.101] parse error at line 3, column 5: ...".
    const std::string_view message = e.what();
    const auto tag_end = message.find("] ");
    return refuse(refit::parse_error(
        fmt::format("{}: not valid JSON: {}", what_,
                    tag_end == std::string_view::npos ? message : message.substr(tag_end + 2))));
  }

  Result<void> result() && { return std::move(result_); }

 private:
  bool open(bool object) {
    if (frames_.size() >= kMaxJsonDepth)
      return refuse(
          unsupported(fmt::format("{}: {}: nested deeper than {} levels", what_, path(), kMaxJsonDepth)));
    frames_.push_back(Frame{.object = object});
    return true;
  }
  bool close() {
    frames_.pop_back();
    return value();
  }
  bool value() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
    return true;
  }
  bool refuse(Result<void> error) {
    result_ = std::move(error);
    return false;
  }

  // The JSON path of the value being parsed ("tensors[3].shape"), "the root" at the top.
  std::string path() const {
    std::string out;
    for (const auto& f : frames_) out = f.object ? child(out, f.key) : element(out, f.index);
    return out.empty() ? "the root" : out;
  }

  std::string_view what_;
  std::vector<Frame> frames_;
  Result<void> result_;
};

}  // namespace

Result<void> check_json(std::string_view text, std::string_view what) {
  Guard guard(what);
  Json::sax_parse(text, &guard);
  return std::move(guard).result();
}

}  // namespace refit::json_fields
