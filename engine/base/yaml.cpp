// YAML to RapidJSON: libyaml's events built into documents (yaml.hpp has the typing rules).
#include "engine/base/yaml.hpp"

#include <yaml.h>

#include <unordered_map>

#include "engine/base/yaml_scalar.hpp"

namespace plumb::yaml {
namespace {

constexpr std::string_view kTagPrefix = "tag:yaml.org,2002:";

std::string position(const yaml_mark_t& m) {
  return " at line " + std::to_string(m.line + 1) + ", column " + std::to_string(m.column + 1);
}

std::string_view text_of(const yaml_char_t* p) {
  return p == nullptr ? std::string_view{} : std::string_view(reinterpret_cast<const char*>(p));
}

/// The parser and its current event, released whatever way the load ends.
class Parser {
 public:
  Parser() : ok_(yaml_parser_initialize(&parser_) != 0) {}
  Parser(const Parser&) = delete;
  Parser& operator=(const Parser&) = delete;
  ~Parser() {
    drop_event();
    if (ok_) yaml_parser_delete(&parser_);
  }
  [[nodiscard]] bool ok() const { return ok_; }
  void input(std::string_view text) {
    yaml_parser_set_input_string(&parser_, reinterpret_cast<const unsigned char*>(text.data()), text.size());
  }
  /// The next event; nullptr with problem() set when the text is malformed.
  const yaml_event_t* next() {
    drop_event();
    if (yaml_parser_parse(&parser_, &event_) == 0) return nullptr;
    has_event_ = true;
    return &event_;
  }
  [[nodiscard]] std::string problem() const {
    std::string p = parser_.problem != nullptr ? parser_.problem : "malformed YAML";
    return p + position(parser_.problem_mark);
  }

 private:
  void drop_event() {
    if (has_event_) yaml_event_delete(&event_);
    has_event_ = false;
  }
  yaml_parser_t parser_{};
  yaml_event_t event_{};
  bool ok_ = false;
  bool has_event_ = false;
};

/// A value with its size for the alias budget (one per node plus string bytes).
struct Sized {
  json::Value v;
  size_t weight = 1;
};

/// An open sequence or mapping.
struct Frame {
  json::Value node;
  json::Value key;           // the pending key of a mapping
  bool has_key = false;
  std::string anchor;
  size_t weight = 1;
};

/// Builds the documents of one stream from its events.
class Builder {
 public:
  explicit Builder(const std::string& origin) : origin_(origin) {}

  Status event(const yaml_event_t& e) {
    switch (e.type) {
      case YAML_DOCUMENT_START_EVENT:
        doc_ = json::Document();
        anchors_.clear();
        return {};
      case YAML_DOCUMENT_END_EVENT:
        json::keep_last_duplicates(doc_);
        docs_.push_back(std::move(doc_));
        return {};
      case YAML_SEQUENCE_START_EVENT:
        return open(e, json::Value(rapidjson::kArrayType), e.data.sequence_start.anchor);
      case YAML_MAPPING_START_EVENT:
        return open(e, json::Value(rapidjson::kObjectType), e.data.mapping_start.anchor);
      case YAML_SEQUENCE_END_EVENT:
      case YAML_MAPPING_END_EVENT:
        return close();
      case YAML_SCALAR_EVENT:
        return scalar(e);
      case YAML_ALIAS_EVENT:
        return alias(e);
      default:
        return {};
    }
  }
  std::vector<json::Document>& docs() { return docs_; }

 private:
  Status error(const std::string& what, const yaml_mark_t& m) const {
    return fail(cni_code::kDecode, "cannot decode " + origin_ + ": " + what + position(m));
  }
  /// " (key \"k\")" when the value being read is a mapping member.
  std::string key_note() const {
    if (stack_.empty() || !stack_.back().has_key) return {};
    return " (key " + json::quote(stack_.back().key) + ")";
  }

  Status open(const yaml_event_t& e, json::Value node, const yaml_char_t* anchor) {
    if (expects_key()) return error("a mapping key must be a string, not a collection", e.start_mark);
    if (stack_.size() >= kMaxDepth) return error("nested deeper than " + std::to_string(kMaxDepth), e.start_mark);
    stack_.push_back(Frame{std::move(node), json::Value(), false, std::string(text_of(anchor)), 1});
    return {};
  }

  Status close() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    return add(Sized{std::move(f.node), f.weight}, f.anchor);
  }

  Status scalar(const yaml_event_t& e) {
    const auto& s = e.data.scalar;
    const std::string_view text(reinterpret_cast<const char*>(s.value), s.length);
    const std::string_view anchor = text_of(s.anchor);
    auto& a = doc_.GetAllocator();
    if (expects_key()) {  // keys are the text as written
      return add(Sized{json::Value(text.data(), static_cast<rapidjson::SizeType>(text.size()), a), 1 + text.size()}, anchor);
    }
    std::string_view tag = text_of(s.tag);
    if (tag.starts_with(kTagPrefix)) tag.remove_prefix(kTagPrefix.size());
    auto v = scalar_value(text, tag, s.style != YAML_PLAIN_SCALAR_STYLE, a);
    if (!v) return error(v.error().msg + key_note(), e.start_mark);
    return add(Sized{std::move(*v), 1 + text.size()}, anchor);
  }

  Status alias(const yaml_event_t& e) {
    const std::string name(text_of(e.data.alias.anchor));
    if (++aliases_ > kMaxAliases) return error("more than " + std::to_string(kMaxAliases) + " aliases", e.start_mark);
    auto it = anchors_.find(name);
    if (it == anchors_.end()) return error("unknown alias *" + name, e.start_mark);
    expansion_ += it->second.weight;
    if (expansion_ > kMaxAliasExpansion) {
      return error("aliases expand to more than " + std::to_string(kMaxAliasExpansion) + " bytes", e.start_mark);
    }
    if (expects_key() && !it->second.v.IsString()) return error("a mapping key must be a string (alias *" + name + ")", e.start_mark);
    return add(Sized{json::Value(it->second.v, doc_.GetAllocator()), it->second.weight}, {});
  }

  [[nodiscard]] bool expects_key() const {
    return !stack_.empty() && stack_.back().node.IsObject() && !stack_.back().has_key;
  }

  /// Places a finished value: the document's root, a sequence element, a mapping key or value.
  Status add(Sized s, std::string_view anchor) {
    auto& a = doc_.GetAllocator();
    if (!anchor.empty()) anchors_[std::string(anchor)] = Sized{json::Value(s.v, a), s.weight};
    if (stack_.empty()) {
      static_cast<json::Value&>(doc_) = std::move(s.v);
      return {};
    }
    Frame& top = stack_.back();
    top.weight += s.weight;
    if (top.node.IsArray()) {
      top.node.PushBack(std::move(s.v), a);
    } else if (!top.has_key) {
      top.key = std::move(s.v);
      top.has_key = true;
    } else {
      top.node.AddMember(std::move(top.key), std::move(s.v), a);
      top.has_key = false;
    }
    return {};
  }

  const std::string& origin_;
  json::Document doc_;
  std::vector<Frame> stack_;
  std::unordered_map<std::string, Sized> anchors_;
  std::vector<json::Document> docs_;
  size_t aliases_ = 0;
  size_t expansion_ = 0;
};

/// Parses documents of `text` until the stream ends or `max_docs` are complete.
Result<std::vector<json::Document>> load_docs(std::string_view text, const std::string& origin, size_t max_docs) {
  if (text.size() > kMaxBytes) {
    return fail(cni_code::kDecode, "cannot decode " + origin + ": larger than " + std::to_string(kMaxBytes) + " bytes");
  }
  Parser parser;
  if (!parser.ok()) return fail(cni_code::kInternal, "cannot initialise the YAML parser");
  parser.input(text);
  Builder b(origin);
  while (b.docs().size() < max_docs) {
    const yaml_event_t* e = parser.next();
    if (e == nullptr) return fail(cni_code::kDecode, "cannot decode " + origin + ": " + parser.problem());
    if (e->type == YAML_STREAM_END_EVENT) break;
    PLUMB_TRY(b.event(*e));
  }
  return std::move(b.docs());
}

}  // namespace

Result<std::vector<json::Document>> load_all(std::string_view text, const std::string& origin) {
  return load_docs(text, origin, SIZE_MAX);
}

Result<json::Document> load(std::string_view text, const std::string& origin) {
  auto docs = PLUMB_TRY(load_docs(text, origin, 1));
  if (docs.empty()) return json::Document();
  return std::move(docs.front());
}

}  // namespace plumb::yaml
