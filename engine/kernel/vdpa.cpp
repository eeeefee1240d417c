#include "engine/kernel/vdpa.hpp"

#include <linux/genetlink.h>
#include <linux/vdpa.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <optional>

namespace plumb::vdpa {
namespace {

namespace fs = std::filesystem;

const std::vector<netlink::AttrPolicy> kCtrlPolicy = {
    {CTRL_ATTR_FAMILY_ID, MNL_TYPE_U16, 0},
    {CTRL_ATTR_FAMILY_NAME, MNL_TYPE_NUL_STRING, 0},
};
const std::vector<netlink::AttrPolicy> kDevPolicy = {
    {VDPA_ATTR_MGMTDEV_BUS_NAME, MNL_TYPE_NUL_STRING, 0},
    {VDPA_ATTR_MGMTDEV_DEV_NAME, MNL_TYPE_NUL_STRING, 0},
    {VDPA_ATTR_DEV_NAME, MNL_TYPE_NUL_STRING, 0},
};

void put_genl(netlink::Message& m, uint8_t cmd, uint8_t version) {
  auto* g = m.put_header<genlmsghdr>();
  g->cmd = cmd;
  g->version = version;
}

/// Sorted entry names of a directory; empty when it does not exist.
std::vector<std::string> entries(const fs::path& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    out.push_back(it->path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

netlink::Message build_get_family(const std::string& name) {
  netlink::Message m(GENL_ID_CTRL, 0);
  put_genl(m, CTRL_CMD_GETFAMILY, 1);
  m.put_str(CTRL_ATTR_FAMILY_NAME, name);
  return m;
}

netlink::Message build_dev_get_dump(uint16_t family_id) {
  netlink::Message m(family_id, NLM_F_DUMP);
  put_genl(m, VDPA_CMD_DEV_GET, VDPA_GENL_VERSION);
  return m;
}

Result<Device> parse_device(const nlmsghdr* nlh) {
  auto tb = PLUMB_TRY(netlink::parse_attrs(nlh, sizeof(genlmsghdr), VDPA_ATTR_MAX, kDevPolicy));
  if (tb[VDPA_ATTR_DEV_NAME] == nullptr) return fail(cni_code::kDecode, "vdpa VDPA_CMD_DEV_GET reply without VDPA_ATTR_DEV_NAME");
  Device d;
  d.name = mnl_attr_get_str(tb[VDPA_ATTR_DEV_NAME]);
  if (tb[VDPA_ATTR_MGMTDEV_BUS_NAME] != nullptr) d.mgmt_bus = mnl_attr_get_str(tb[VDPA_ATTR_MGMTDEV_BUS_NAME]);
  if (tb[VDPA_ATTR_MGMTDEV_DEV_NAME] != nullptr) d.mgmt_dev = mnl_attr_get_str(tb[VDPA_ATTR_MGMTDEV_DEV_NAME]);
  return d;
}

Result<uint16_t> resolve_family(netlink::Socket& genl, const std::string& name) {
  netlink::Message m = build_get_family(name);
  std::optional<uint16_t> id;
  auto st = genl.query(m, "resolve generic netlink family \"" + name + "\"", [&](const nlmsghdr* nlh) -> Status {
    auto tb = PLUMB_TRY(netlink::parse_attrs(nlh, sizeof(genlmsghdr), CTRL_ATTR_MAX, kCtrlPolicy));
    if (tb[CTRL_ATTR_FAMILY_ID] != nullptr) id = mnl_attr_get_u16(tb[CTRL_ATTR_FAMILY_ID]);
    return {};
  });
  if (!st && st.error().sys_errno == ENOENT) {
    return fail(cni_code::kKernelFeature,
                "this kernel has no \"" + name + "\" generic netlink family (the vdpa module is not loaded or not built)",
                st.error().text());
  }
  if (!st) return std::unexpected(st.error());
  if (!id) return fail(cni_code::kKernel, "generic netlink family \"" + name + "\": the reply carries no family id");
  return *id;
}

Result<std::vector<Device>> GenlLister::list() {
  auto genl = PLUMB_TRY(netlink::shared(NETLINK_GENERIC));
  uint16_t family = PLUMB_TRY(resolve_family(*genl, VDPA_GENL_NAME));
  netlink::Message m = build_dev_get_dump(family);
  std::vector<Device> out;
  PLUMB_TRY(genl->dump(m, "list vDPA devices", [&](const nlmsghdr* nlh) -> Status {
    out.push_back(PLUMB_TRY(parse_device(nlh)));
    return {};
  }));
  return out;
}

std::optional<Device> find_by_pci(const std::vector<Device>& devices, const std::string& pci) {
  for (auto& d : devices) {
    if (d.mgmt_bus == "pci" && d.mgmt_dev == pci) return d;
  }
  return std::nullopt;
}

bool valid_device_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || name == "." || name == "..") return false;
  return std::ranges::all_of(name, [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
           c == ':' || c == '-';
  });
}

Result<Binding> read_binding(const std::string& sysfs_root, const std::string& dev) {
  fs::path dir = fs::path(sysfs_root) / "bus/vdpa/devices" / dev;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return fail(cni_code::kNotFound, "vDPA device " + dev + " is not in sysfs (" + dir.string() + ")");
  Binding b;
  fs::path drv = fs::read_symlink(dir / "driver", ec);
  if (!ec) b.driver = drv.filename().string();
  if (b.driver == "vhost_vdpa") {
    for (auto& e : entries(dir)) {
      if (e.rfind("vhost-vdpa-", 0) == 0) b.vhost_path = "/dev/" + e;
    }
    if (b.vhost_path.empty()) {
      return fail(cni_code::kKernelFeature, "vDPA device " + dev + " is bound to vhost_vdpa but has no vhost-vdpa-N entry in " + dir.string());
    }
  } else if (b.driver == "virtio_vdpa") {
    for (auto& e : entries(dir)) {
      if (e.rfind("virtio", 0) != 0) continue;
      auto nets = entries(dir / e / "net");
      if (!nets.empty()) {
        b.netdev = nets.front();
        break;
      }
    }
    if (b.netdev.empty()) {
      return fail(cni_code::kKernelFeature, "vDPA device " + dev + " is bound to virtio_vdpa but no virtioN/net/ netdev is in " + dir.string());
    }
  }
  return b;
}

}  // namespace plumb::vdpa
