#include "engine/devinfo/devinfo.hpp"
#include "engine/base/file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>

namespace plumb::devinfo {
namespace {

using Alloc = json::Document::AllocatorType;

void put(json::Value& obj, const char* key, const std::string& v, Alloc& a) {
  if (!v.empty()) obj.AddMember(json::Value(key, a), json::Value(v.c_str(), a), a);
}

/// {"type": type, "version": kSpecVersion, type: {}}; returns the document and its body.
json::Document envelope(const char* type) {
  json::Document d(rapidjson::kObjectType);
  auto& a = d.GetAllocator();
  d.AddMember("type", json::Value(type, a), a);
  d.AddMember("version", json::Value(std::string(kSpecVersion).c_str(), a), a);
  d.AddMember(json::Value(type, a), json::Value(rapidjson::kObjectType), a);
  return d;
}

/// The directory of a device-info file (<base>/cni), opened never through a link at its last
/// component; created 0755 when `create`.
Result<Dir> parent_of(const std::string& path, bool create) {
  auto dir = Dir::open(std::filesystem::path(path).parent_path().string(), create ? std::optional<mode_t>(0755) : std::nullopt);
  if (!dir) return std::unexpected(dir.error().within("device-info file " + path));
  return dir;
}

std::string name_of(const std::string& path) { return std::filesystem::path(path).filename().string(); }

/// Creates `path` exclusively with mode 0444 and writes `data`, flushed to disk (a device plugin
/// or DEL after a power loss finds the whole file or none). kConflict when present.
Status create_exclusive(const std::string& path, const std::string& data, const std::string& what) {
  auto dir = PLUMB_TRY(parent_of(path, true));
  auto st = dir.create_exclusive(name_of(path), data, {.mode = 0444, .fsync = true});
  if (!st && st.error().sys_errno == EEXIST) return fail(cni_code::kConflict, what + ": device-info file " + path + " already exists");
  if (!st) return std::unexpected(st.error().within(what));
  return {};
}

}  // namespace

json::Document make_pci(const PciInfo& i) {
  json::Document d = envelope("pci");
  auto& a = d.GetAllocator();
  json::Value& body = d["pci"];
  put(body, "pci-address", i.pci_address, a);
  put(body, "vhost-net", i.vhost_net, a);
  put(body, "rdma-device", i.rdma_device, a);
  put(body, "pf-pci-address", i.pf_pci_address, a);
  put(body, "representor-device", i.representor_device, a);
  return d;
}

json::Document make_vdpa(const VdpaInfo& i) {
  json::Document d = envelope("vdpa");
  auto& a = d.GetAllocator();
  json::Value& body = d["vdpa"];
  put(body, "parent-device", i.parent_device, a);
  put(body, "driver", i.driver, a);
  put(body, "path", i.path, a);
  put(body, "pci-address", i.pci_address, a);
  put(body, "pf-pci-address", i.pf_pci_address, a);
  put(body, "representor-device", i.representor_device, a);
  return d;
}

Status validate(const json::Value& info, const std::string& what) {
  if (!info.IsObject()) return fail(cni_code::kInvalidConfig, what + ": device-info must be a JSON object");
  auto type = PLUMB_TRY(json::get_string(info, "type", what));
  if (!type) return fail(cni_code::kInvalidConfig, what + ": device-info lacks \"type\"");
  if (*type != "pci" && *type != "vdpa" && *type != "vhost-user" && *type != "memif") {
    return fail(cni_code::kInvalidConfig, what + ": device-info type \"" + *type + "\" is not pci, vdpa, vhost-user or memif");
  }
  auto version = PLUMB_TRY(json::get_string(info, "version", what));
  if (!version) return fail(cni_code::kInvalidConfig, what + ": device-info lacks \"version\"");
  const json::Value* body = PLUMB_TRY(json::get_object(info, *type, what));
  if (body == nullptr) return fail(cni_code::kInvalidConfig, what + ": device-info of type " + *type + " lacks the \"" + *type + "\" object");
  if (*type == "pci" && !PLUMB_TRY(json::get_string(*body, "pci-address", what + ".pci"))) {
    return fail(cni_code::kInvalidConfig, what + ": device-info of type pci lacks the required \"pci-address\"");
  }
  return {};
}

std::string dp_file(const std::string& base, std::string_view resource_name, std::string_view device_id) {
  std::string r(resource_name);
  for (char& c : r) {
    if (c == '/') c = '-';
  }
  return base + "/dp/" + r + "-" + std::string(device_id) + "-device.json";
}

std::string cni_file(const std::string& base, std::string_view container_id, std::string_view ifname) {
  return base + "/cni/" + std::string(container_id) + "-" + std::string(ifname) + "-device.json";
}

Result<std::optional<json::Document>> read(const std::string& path) {
  auto text = read_file(path, "device-info file", 1u << 20);
  if (!text && text.error().cni_code == cni_code::kNotFound) return std::optional<json::Document>{};
  if (!text) return std::unexpected(text.error());
  auto doc = PLUMB_TRY(json::parse(*text, "device-info file " + path));
  PLUMB_TRY(validate(doc, "device-info file " + path));
  return std::optional<json::Document>(std::move(doc));
}

Status write_once(const std::string& path, const json::Value& info) {
  return create_exclusive(path, json::dump(info), "write device-info");
}

Status complete(const std::string& path, const json::Value& found) {
  PLUMB_TRY(validate(found, "device-info found by the driver for " + path));
  auto existing = PLUMB_TRY(read(path));
  if (!existing) return write_once(path, found);
  json::Document& doc = *existing;
  std::string type = doc["type"].GetString();
  if (type != found["type"].GetString()) return {};  // the device plugin's description stands
  auto& a = doc.GetAllocator();
  json::Value& body = doc[type.c_str()];
  bool changed = false;
  for (auto it = found[type.c_str()].MemberBegin(); it != found[type.c_str()].MemberEnd(); ++it) {
    if (json::find(body, it->name.GetString()) != nullptr) continue;
    json::Value v;
    v.CopyFrom(it->value, a);
    json::set(body, it->name.GetString(), std::move(v), a);
    changed = true;
  }
  if (!changed) return {};
  auto dir = PLUMB_TRY(parent_of(path, false));
  auto st = dir.write_atomic(name_of(path), json::dump(doc), {.mode = 0444});
  if (!st) return std::unexpected(st.error().within("complete device-info"));
  return {};
}

Status remove(const std::string& path) {
  auto dir = parent_of(path, false);
  if (!dir && dir.error().cni_code == cni_code::kNotFound) return {};
  if (!dir) return std::unexpected(dir.error());
  return dir->remove(name_of(path));
}

std::string chain_device_id(const json::Value& plugins) {
  if (!plugins.IsArray()) return {};
  for (auto& p : plugins.GetArray()) {
    if (const json::Value* rc = json::find(p, "runtimeConfig"); rc != nullptr) {
      if (const json::Value* id = json::find(*rc, "deviceID", true); id != nullptr && id->IsString() && id->GetStringLength() > 0) {
        return id->GetString();
      }
    }
    if (const json::Value* id = json::find(p, "deviceID"); id != nullptr && id->IsString() && id->GetStringLength() > 0) {
      return id->GetString();
    }
  }
  return {};
}

Status plan(json::Document& plugins, Plan& plan, const std::string& base, const std::string& container_id,
            const std::string& ifname) {
  if (!plugins.IsArray()) return fail(cni_code::kInternal, "device-info planning: plugins is not an array");
  plan.device_id = chain_device_id(plugins);
  plan.file.clear();
  const bool names_vdpa = std::ranges::any_of(plugins.GetArray(), [](const json::Value& p) {
    const json::Value* v = json::find(p, "vdpaDevice");
    return v != nullptr && v->IsString() && v->GetStringLength() > 0;
  });
  if ((plan.resource_name.empty() || plan.device_id.empty()) && !names_vdpa) return {};
  plan.file = cni_file(base, container_id, ifname);
  auto& a = plugins.GetAllocator();
  for (auto& p : plugins.GetArray()) {
    const json::Value* caps = json::find(p, "capabilities");
    const json::Value* on = caps != nullptr ? json::find(*caps, kCapability) : nullptr;
    if (on == nullptr || !on->IsBool() || !on->GetBool()) continue;
    if (!p.HasMember("runtimeConfig") || !p["runtimeConfig"].IsObject()) json::set(p, "runtimeConfig", json::Value(rapidjson::kObjectType), a);
    json::set_string(p["runtimeConfig"], kCapability, plan.file, a);
  }
  return {};
}

Status prepare(txn::Journal& journal, const std::string& base, const Plan& plan) {
  if (plan.file.empty()) return {};
  struct stat st {};
  if (::lstat(plan.file.c_str(), &st) == 0) {
    return fail(cni_code::kConflict, "device-info file " + plan.file + " already exists (written once per attachment)");
  }
  PLUMB_TRY(journal.will(undo_remove(plan.file)));
  if (plan.resource_name.empty() || plan.device_id.empty()) return {};  // no device plugin's file to copy
  std::string dp = dp_file(base, plan.resource_name, plan.device_id);
  auto doc = read(dp);
  if (!doc) return std::unexpected(doc.error().within("device plugin file of resource " + plan.resource_name));
  if (!*doc) return {};  // no device plugin file: the driver writes the file from what it finds
  return write_once(plan.file, **doc);
}

json::Document undo_remove(const std::string& path) {
  json::Document d(rapidjson::kObjectType);
  json::set_string(d, "op", "devinfo_remove", d.GetAllocator());
  json::set_string(d, "path", path, d.GetAllocator());
  return d;
}

Status run_undo_remove(const json::Value& op) {
  auto path = PLUMB_TRY(json::get_string(op, "path", "undo devinfo_remove"));
  if (!path || path->empty()) return fail(cni_code::kDecode, "undo devinfo_remove lacks \"path\"");
  return remove(*path);
}

}  // namespace plumb::devinfo
