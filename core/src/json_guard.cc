#include "json_guard.h"

#include <memory>
#include <set>
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

class Guard {
 public:
  bool on(Json::parse_event_t event, Json& parsed) {
    using E = Json::parse_event_t;
    switch (event) {
      case E::object_start:
      case E::array_start:
        if (frames_.size() >= kMaxJsonDepth)
          throw Refusal{ErrorCode::kUnsupported,
                        fmt::format("{}: nested deeper than {} levels", path(), kMaxJsonDepth)};
        frames_.push_back(Frame{.object = event == E::object_start});
        break;
      case E::key:
        frames_.back().key = parsed.get<std::string>();
        if (!frames_.back().keys.insert(frames_.back().key).second)
          throw Refusal{ErrorCode::kInvalidArgument, fmt::format("{}: key appears twice", path())};
        break;
      case E::object_end:
      case E::array_end:
        frames_.pop_back();
        next_element();
        break;
      case E::value:
        next_element();
        break;
    }
    return true;
  }

 private:
  void next_element() {
    if (!frames_.empty() && !frames_.back().object) ++frames_.back().index;
  }

  // The JSON path of the value being parsed ("tensors[3].shape"), "the root" at the top.
  std::string path() const {
    std::string out;
    for (const auto& f : frames_) out = f.object ? child(out, f.key) : element(out, f.index);
    return out.empty() ? "the root" : out;
  }

  std::vector<Frame> frames_;
};

}  // namespace

Json::parser_callback_t guard_callback() {
  auto guard = std::make_shared<Guard>();
  return [guard](int /*depth*/, Json::parse_event_t event, Json& parsed) { return guard->on(event, parsed); };
}

}  // namespace refit::json_fields
