// The typed undo journal's one writer and one reader (drivers/undo.hpp); what runs the
// operations is in undo_run.cpp, so the fuzzers can link the reader alone.
#include "drivers/undo.hpp"

#include <netinet/in.h>

#include <limits>
#include <type_traits>

namespace plumb::drivers::undo {
namespace {

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};
template <class T>
struct is_vector : std::false_type {};
template <class T>
struct is_vector<std::vector<T>> : std::true_type {};

template <class T>
concept VfOp = std::is_base_of_v<VfOwner, T>;
/// An engine value written as its text (str()) and read back with its parse().
template <class T>
concept TextValue = std::is_same_v<T, IpAddr> || std::is_same_v<T, IpPrefix> || std::is_same_v<T, Mac>;
template <class T>
concept SkipIfUnknown = T::kSkipIfUnknown;
template <class T>
concept SmallUint = std::is_same_v<T, uint8_t> || std::is_same_v<T, uint16_t>;

/// An L4 protocol number recorded by name ("tcp", "udp", "sctp"), as portmap always wrote it.
struct L4ProtoName {
  uint8_t* value;
};
/// A string recorded only when not empty (absent: "").
struct NonEmptyText {
  std::string* value;
};

/// The keys of the engine structures operations record, one list for the writer and the reader.
template <class V>
void engine_fields(V& v, nft::PortMapping& m) {
  L4ProtoName proto{&m.l4proto};
  NonEmptyText conditions{&m.condition_class};
  v("protocol", proto);
  v("hostIP", m.host_ip);
  v("hostPort", m.host_port);
  v("podIP", m.pod_ip);
  v("containerPort", m.container_port);
  v("conditions", conditions);
}
template <class V>
void engine_fields(V& v, route::Route& r) {
  v("dst", r.dst);
  v("gw", r.gw);
  v("prefsrc", r.prefsrc);
  v("oif", r.oif);
  v("table", r.table);
  v("priority", r.priority);
  v("scope", r.scope);
  v("protocol", r.protocol);
  v("type", r.type);
}
template <class T>
concept EngineRecord = std::is_same_v<T, nft::PortMapping> || std::is_same_v<T, route::Route>;

/// Writes the fields of one value into a JSON object.
class Writer {
 public:
  Writer(json::Value& obj, json::Document::AllocatorType& a) : obj_(obj), a_(a) {}

  template <class T>
  void operator()(std::string_view key, const T& value) {
    if constexpr (is_optional<T>::value) {
      if (value) (*this)(key, *value);
    } else if constexpr (std::is_same_v<T, NonEmptyText>) {
      if (!value.value->empty()) (*this)(key, *value.value);
    } else {
      json::set(obj_, key, to_value(value), a_);
    }
  }

 private:
  template <class T>
  json::Value to_value(const T& v) {
    if constexpr (std::is_same_v<T, std::string>) {
      return json::Value(v.c_str(), static_cast<rapidjson::SizeType>(v.size()), a_);
    } else if constexpr (TextValue<T>) {
      return to_value(v.str());
    } else if constexpr (std::is_same_v<T, L4ProtoName>) {
      return to_value(nft::l4proto_name(*v.value));
    } else if constexpr (SmallUint<T>) {
      return json::Value(static_cast<unsigned>(v));
    } else if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, int> || std::is_same_v<T, uint32_t> ||
                         std::is_same_v<T, uint64_t>) {
      return json::Value(v);
    } else if constexpr (std::is_same_v<T, json::Document>) {
      json::Value out;
      out.CopyFrom(v, a_);
      return out;
    } else if constexpr (std::is_same_v<T, vf::VfSetting>) {
      return v.to_json(a_);
    } else if constexpr (std::is_same_v<T, std::map<std::string, std::string>>) {
      json::Value out(rapidjson::kObjectType);
      for (const auto& [k, val] : v) json::set_string(out, k, val, a_);
      return out;
    } else if constexpr (is_vector<T>::value) {
      json::Value out(rapidjson::kArrayType);
      for (const auto& item : v) out.PushBack(to_value(item), a_);
      return out;
    } else if constexpr (EngineRecord<T>) {
      json::Value out(rapidjson::kObjectType);
      Writer nested(out, a_);
      engine_fields(nested, const_cast<T&>(v));  // only reads through a Writer
      return out;
    } else {
      json::Value out(rapidjson::kObjectType);
      Writer nested(out, a_);
      const_cast<T&>(v).fields(nested);  // fields() only reads through a Writer
      return out;
    }
  }

  json::Value& obj_;
  json::Document::AllocatorType& a_;
};

/// Reads the fields of one value from a JSON object; the first problem is kept in status().
/// Where it reads ("<where>.<key>..." in messages) is composed only for a message.
class Reader {
 public:
  Reader(const json::Value& obj, const std::string& where) : obj_(obj), root_(&where) {}
  /// Reads member `key`'s object of the one `parent` reads.
  Reader(const json::Value& obj, const Reader& parent, std::string_view key) : obj_(obj), parent_(&parent), key_(key) {}

  template <class T>
  void operator()(std::string_view key, T& out) {
    if (!status_) return;
    const json::Value* v = json::find(obj_, key);
    if constexpr (std::is_same_v<T, NonEmptyText>) {
      out.value->clear();
      if (v != nullptr) read(*v, *out.value, key);
    } else if constexpr (is_optional<T>::value) {
      if (v == nullptr) {
        out.reset();
        return;
      }
      typename T::value_type inner{};
      if (read(*v, inner, key)) out = std::move(inner);
    } else {
      if (v == nullptr) {
        status_ = fail(cni_code::kDecode, where() + " lacks \"" + std::string(key) + "\"");
        return;
      }
      read(*v, out, key);
    }
  }

  [[nodiscard]] const Status& status() const { return status_; }

 private:
  bool bad(std::string_view key, std::string_view type) {
    status_ = fail(cni_code::kDecode, where() + ": \"" + std::string(key) + "\" is not " + std::string(type));
    return false;
  }

  template <class T>
  bool read(const json::Value& v, T& out, std::string_view key) {
    if constexpr (std::is_same_v<T, std::string>) {
      if (!v.IsString()) return bad(key, "a string");
      out.assign(v.GetString(), v.GetStringLength());
    } else if constexpr (TextValue<T>) {
      if (!v.IsString()) return bad(key, "a string");
      auto parsed = T::parse(std::string_view(v.GetString(), v.GetStringLength()));
      if (!parsed) {
        status_ = fail(cni_code::kDecode, where() + ": \"" + std::string(key) + "\" " + parsed.error().text());
        return false;
      }
      out = *parsed;
    } else if constexpr (std::is_same_v<T, L4ProtoName>) {
      if (!v.IsString()) return bad(key, "a string");
      const std::string_view name(v.GetString(), v.GetStringLength());
      if (name == "tcp")
        *out.value = IPPROTO_TCP;
      else if (name == "udp")
        *out.value = IPPROTO_UDP;
      else if (name == "sctp")
        *out.value = IPPROTO_SCTP;
      else
        return bad(key, "\"tcp\", \"udp\" or \"sctp\"");
    } else if constexpr (SmallUint<T>) {
      if (!v.IsUint() || v.GetUint() > std::numeric_limits<T>::max()) {
        return bad(key, "an integer in 0.." + std::to_string(std::numeric_limits<T>::max()));
      }
      out = static_cast<T>(v.GetUint());
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!v.IsBool()) return bad(key, "a boolean");
      out = v.GetBool();
    } else if constexpr (std::is_same_v<T, int>) {
      if (!v.IsInt()) return bad(key, "an integer");
      out = v.GetInt();
    } else if constexpr (std::is_same_v<T, uint32_t>) {
      if (!v.IsUint()) return bad(key, "an unsigned 32-bit integer");
      out = v.GetUint();
    } else if constexpr (std::is_same_v<T, uint64_t>) {
      if (!v.IsUint64()) return bad(key, "an unsigned 64-bit integer");
      out = v.GetUint64();
    } else if constexpr (std::is_same_v<T, json::Document>) {
      if (!v.IsObject()) return bad(key, "an object");
      out.CopyFrom(v, out.GetAllocator());
    } else if constexpr (std::is_same_v<T, vf::VfSetting>) {
      auto s = vf::VfSetting::from_json(v);
      if (!s) {
        status_ = std::unexpected(s.error().within(where()));
        return false;
      }
      out = *s;
    } else if constexpr (std::is_same_v<T, std::map<std::string, std::string>>) {
      if (!v.IsObject()) return bad(key, "an object");
      for (auto it = v.MemberBegin(); it != v.MemberEnd(); ++it) {
        if (!it->value.IsString()) return bad(key, "an object of strings");
        out[it->name.GetString()] = it->value.GetString();
      }
    } else if constexpr (is_vector<T>::value) {
      if (!v.IsArray()) return bad(key, "a list");
      for (const auto& item : v.GetArray()) {
        typename T::value_type x{};
        if (!read(item, x, key)) return false;
        out.push_back(std::move(x));
      }
    } else {
      if (!v.IsObject()) return bad(key, "an object");
      Reader nested(v, *this, key);
      if constexpr (EngineRecord<T>) {
        engine_fields(nested, out);
      } else {
        out.fields(nested);
      }
      if (!nested.status()) {
        status_ = nested.status();
        return false;
      }
    }
    return true;
  }

  /// "<where>.<key>...": the root's where, then each nested member's key.
  [[nodiscard]] std::string where() const {
    return parent_ != nullptr ? parent_->where() + "." + std::string(key_) : *root_;
  }

  const json::Value& obj_;
  const std::string* root_ = nullptr;  ///< the root reader's where (outlives every reader)
  const Reader* parent_ = nullptr;     ///< a nested reader's parent
  std::string_view key_;               ///< a nested reader's member name
  Status status_;
};

template <class T>
std::string op_name(const T& op) {
  if constexpr (VfOp<T>) {
    return op.driver + "." + std::string(T::kVerb);
  } else {
    return std::string(T::kName);
  }
}

/// Decodes one alternative of Op from `v` once its name matched.
template <class T>
Result<Op> decode_as(const json::Value& v, const std::string& where, const std::string& driver) {
  T op;
  if constexpr (VfOp<T>) op.driver = driver;
  Reader r(v, where);
  op.fields(r);
  if (!r.status()) return std::unexpected(r.status().error());
  return Op(std::move(op));
}

/// Tries every alternative of Op against `name`.
template <size_t I = 0>
Result<Op> decode_named(const json::Value& v, const std::string& name, const std::string& where) {
  if constexpr (I == std::variant_size_v<Op>) {
    return fail(cni_code::kNewerRecord, where + ": unknown undo operation \"" + name +
                                            "\" (written by a newer plumb?)");
  } else {
    using T = std::variant_alternative_t<I, Op>;
    if constexpr (VfOp<T>) {
      for (std::string_view driver : {"sriov", "ib-sriov", "vdpa", "rdma"}) {
        if (name == std::string(driver) + "." + std::string(T::kVerb)) return decode_as<T>(v, where, std::string(driver));
      }
    } else {
      if (name == T::kName) return decode_as<T>(v, where, {});
    }
    return decode_named<I + 1>(v, name, where);
  }
}

}  // namespace

std::string name_of(const Op& op) {
  return std::visit([](const auto& o) { return op_name(o); }, op);
}

json::Document encode(const Op& op) {
  json::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  json::set_string(d, "op", name_of(op), a);
  Writer w(d, a);
  std::visit(
      [&](const auto& o) {
        using T = std::remove_cvref_t<decltype(o)>;
        const_cast<T&>(o).fields(w);
        if constexpr (SkipIfUnknown<T>) json::set_string(d, "ifUnknown", "skip", a);
      },
      op);
  return d;
}

Result<Op> decode(const json::Value& v, const std::string& origin) {
  if (!v.IsObject()) return fail(cni_code::kDecode, origin + ": an undo operation is not an object");
  const json::Value* name = json::find(v, "op");
  if (name == nullptr || !name->IsString()) return fail(cni_code::kDecode, origin + ": an undo operation has no \"op\" name");
  std::string n = name->GetString();
  return decode_named(v, n, origin + ": undo operation " + n);
}

Status check(const json::Value& undo, const std::string& origin, bool allow_unknown) {
  if (!undo.IsArray()) return fail(cni_code::kDecode, origin + ": the undo list is not a list");
  for (const auto& v : undo.GetArray()) {
    auto op = decode(v, origin);
    if (!op && !(allow_unknown && op.error().cni_code == cni_code::kNewerRecord)) return std::unexpected(op.error());
  }
  return {};
}

}  // namespace plumb::drivers::undo
