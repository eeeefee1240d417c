// JSON values written as block YAML with libyaml's emitter (yaml.hpp).
#include <yaml.h>

#include "engine/base/yaml.hpp"
#include "engine/base/yaml_scalar.hpp"

namespace plumb::yaml {
namespace {

yaml_char_t* chars(const char* s) { return reinterpret_cast<yaml_char_t*>(const_cast<char*>(s)); }

int append(void* out, unsigned char* buffer, size_t size) {
  static_cast<std::string*>(out)->append(reinterpret_cast<const char*>(buffer), size);
  return 1;
}

/// The emitter, released whatever way the dump ends.
class Emitter {
 public:
  explicit Emitter(std::string& out) : ok_(yaml_emitter_initialize(&e_) != 0) {
    if (!ok_) return;
    yaml_emitter_set_output(&e_, append, &out);
    yaml_emitter_set_unicode(&e_, 1);
    yaml_emitter_set_width(&e_, -1);  // no line folding: kubeconfig data stays on one line
  }
  Emitter(const Emitter&) = delete;
  Emitter& operator=(const Emitter&) = delete;
  ~Emitter() {
    if (ok_) yaml_emitter_delete(&e_);
  }
  [[nodiscard]] bool ok() const { return ok_; }
  /// Emits `ev` (initialised by one of libyaml's *_event_initialize, `made` its result).
  bool emit(int made, yaml_event_t& ev) { return made != 0 && yaml_emitter_emit(&e_, &ev) != 0; }

  bool scalar(std::string_view text, bool quote) {
    yaml_event_t ev;
    return emit(yaml_scalar_event_initialize(&ev, nullptr, nullptr, chars(text.data()), static_cast<int>(text.size()), 1, 1,
                                             quote ? YAML_DOUBLE_QUOTED_SCALAR_STYLE : YAML_ANY_SCALAR_STYLE),
                ev);
  }

  bool value(const json::Value& v) {
    yaml_event_t ev;
    if (v.IsObject()) {
      if (!emit(yaml_mapping_start_event_initialize(&ev, nullptr, nullptr, 1, YAML_BLOCK_MAPPING_STYLE), ev)) return false;
      for (const auto& m : v.GetObject()) {
        if (!value(m.name) || !value(m.value)) return false;
      }
      return emit(yaml_mapping_end_event_initialize(&ev), ev);
    }
    if (v.IsArray()) {
      if (!emit(yaml_sequence_start_event_initialize(&ev, nullptr, nullptr, 1, YAML_BLOCK_SEQUENCE_STYLE), ev)) return false;
      for (const auto& m : v.GetArray()) {
        if (!value(m)) return false;
      }
      return emit(yaml_sequence_end_event_initialize(&ev), ev);
    }
    if (v.IsString()) {
      const std::string_view s(v.GetString(), v.GetStringLength());
      return scalar(s, resolve_plain(s).kind != ScalarKind::kString);
    }
    if (v.IsNumber() || v.IsBool() || v.IsNull()) return scalar(json::dump(v), false);
    return false;
  }

 private:
  yaml_emitter_t e_{};
  bool ok_ = false;
};

}  // namespace

Result<std::string> dump(const json::Value& v) {
  std::string out;
  {
    Emitter e(out);
    yaml_event_t ev;
    if (!e.ok() || !e.emit(yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING), ev) ||
        !e.emit(yaml_document_start_event_initialize(&ev, nullptr, nullptr, nullptr, 1), ev) || !e.value(v) ||
        !e.emit(yaml_document_end_event_initialize(&ev, 1), ev) || !e.emit(yaml_stream_end_event_initialize(&ev), ev)) {
      return fail(cni_code::kInternal, "cannot write YAML: libyaml's emitter refused " + json::quote(v, 80));
    }
  }
  return out;
}

}  // namespace plumb::yaml
