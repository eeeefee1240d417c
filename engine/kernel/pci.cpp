// PCI devices in sysfs (engine/kernel/pci.hpp).
#include "engine/kernel/pci.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <filesystem>
#include <optional>
#include <vector>

#include "engine/base/file.hpp"
#include "engine/base/text.hpp"

namespace plumb::pci {
namespace {

namespace fs = std::filesystem;

/// Sorted entry names of a directory; empty when it does not exist.
Result<std::vector<std::string>> entries(const fs::path& dir) {
  auto out = PLUMB_TRY(list_dir(dir.string()));
  std::sort(out.begin(), out.end());
  return out;
}

/// The first entry (sorted) of a directory; "" when it is empty or does not exist.
Result<std::string> first_entry(const fs::path& dir) {
  auto all = PLUMB_TRY(entries(dir));
  return all.empty() ? std::string() : all.front();
}

/// Basename of a symlink's target; "" when it is not a symlink.
std::string link_basename(const fs::path& p) {
  std::error_code ec;
  fs::path target = fs::read_symlink(p, ec);
  return ec ? std::string() : target.filename().string();
}

/// N of the PF's virtfnN link that points at `vf`; nullopt when none does.
Result<std::optional<uint32_t>> vf_index_of(const fs::path& pf, const std::string& vf) {
  std::optional<uint32_t> found;
  for (auto& e : PLUMB_TRY(entries(pf))) {
    if (e.rfind("virtfn", 0) != 0 || e.size() == 6) continue;
    uint32_t n = 0;
    auto [ptr, ec] = std::from_chars(e.data() + 6, e.data() + e.size(), n, 10);
    if (ec != std::errc{} || ptr != e.data() + e.size()) continue;
    if (link_basename(pf / e) == vf) found = n;
  }
  return found;
}

/// Fails unless VF index `d.vf_index` is below the PF's sriov_numvfs (when the PF has that file).
Status check_numvfs(const fs::path& pf, const VfDevice& d, const std::string& what) {
  auto text = read_file((pf / "sriov_numvfs").string(), "sriov_numvfs");
  if (!text && text.error().cni_code == cni_code::kNotFound) return {};
  if (!text) return std::unexpected(text.error().within(what));
  std::string_view numvfs = text::trim(*text);
  unsigned long n = 0;
  auto [ptr, ec] = std::from_chars(numvfs.data(), numvfs.data() + numvfs.size(), n, 10);
  if (ec != std::errc{} || ptr == numvfs.data()) return {};  // unreadable: the PF's listing decides
  if (static_cast<unsigned long>(d.vf_index) >= n) {
    return fail(cni_code::kInvalidConfig, what + ": VF " + d.pci + " has index " + std::to_string(d.vf_index) +
                                              " but PF " + d.pf_pci + " has sriov_numvfs " + std::string(numvfs));
  }
  return {};
}

}  // namespace

bool VfDevice::userspace() const { return driver == "vfio-pci" || driver == "uio_pci_generic" || driver == "igb_uio"; }

bool valid_pci_address(std::string_view s) {
  // dddd:bb:dd.f
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  }
  unsigned dev = 0;
  std::from_chars(s.data() + 8, s.data() + 10, dev, 16);
  return dev <= 0x1f && s[11] >= '0' && s[11] <= '7';
}

Result<VfDevice> lookup_device(const std::string& sysfs_root, const std::string& pci, bool require_vf,
                               const std::string& what) {
  if (!valid_pci_address(pci)) {
    return fail(cni_code::kInvalidConfig, what + " \"" + pci + "\" is not a PCI address (dddd:bb:dd.f)");
  }
  const fs::path devices = fs::path(sysfs_root) / "bus/pci/devices";
  const fs::path dev = devices / pci;
  std::error_code ec;
  if (!fs::is_directory(dev, ec)) {
    return fail(cni_code::kNotFound, what + ": PCI device " + pci + " does not exist (" + dev.string() + ")");
  }
  VfDevice d;
  d.pci = pci;
  d.pf_pci = link_basename(dev / "physfn");
  d.driver = link_basename(dev / "driver");
  d.netdev = PLUMB_TRY(first_entry(dev / "net"));
  d.rdma_device = PLUMB_TRY(first_entry(dev / "infiniband"));
  if (d.pf_pci.empty()) {
    if (require_vf)
      return fail(cni_code::kInvalidConfig, what + ": PCI device " + pci + " is not an SR-IOV VF (no physfn link)");
    return d;
  }
  const fs::path pf = devices / d.pf_pci;
  auto index = PLUMB_TRY(vf_index_of(pf, pci));
  if (!index) {
    return fail(cni_code::kInvalidConfig,
                what + ": VF " + pci + " is not listed by its PF " + d.pf_pci + " (no virtfnN link to it)");
  }
  d.vf_index = *index;
  PLUMB_TRY(check_numvfs(pf, d, what));
  d.pf_netdev = PLUMB_TRY(first_entry(pf / "net"));
  return d;
}

Result<std::vector<PfVf>> list_vfs(const std::string& sysfs_root) {
  const fs::path devices = fs::path(sysfs_root) / "bus/pci/devices";
  std::vector<PfVf> out;
  for (auto& pf : PLUMB_TRY(entries(devices))) {
    if (!valid_pci_address(pf)) continue;
    std::string netdev;
    for (auto& e : PLUMB_TRY(entries(devices / pf))) {
      uint32_t n = 0;
      if (e.rfind("virtfn", 0) != 0 || e.size() == 6) continue;
      auto [ptr, ec] = std::from_chars(e.data() + 6, e.data() + e.size(), n, 10);
      if (ec != std::errc{} || ptr != e.data() + e.size()) continue;
      if (netdev.empty()) netdev = PLUMB_TRY(first_entry(devices / pf / "net"));
      out.push_back(PfVf{pf, netdev, n, link_basename(devices / pf / e)});
    }
  }
  return out;
}

Result<std::vector<std::string>> rdma_devices(const std::string& sysfs_root, const std::string& device) {
  const bool is_pci = valid_pci_address(device);
  if (!is_pci && (device.empty() || device.find('/') != std::string::npos || device == "." || device == "..")) {
    return fail(cni_code::kInvalidConfig, "\"" + device + "\" is neither a PCI address nor an auxiliary device name");
  }
  const fs::path dev = fs::path(sysfs_root) / (is_pci ? "bus/pci/devices" : "bus/auxiliary/devices") / device;
  std::error_code ec;
  if (!fs::is_directory(dev, ec)) {
    return fail(cni_code::kNotFound, std::string(is_pci ? "PCI" : "auxiliary") + " device " + device + " does not exist (" +
                                         dev.string() + ")");
  }
  return entries(dev / "infiniband");
}

Status rebind(const std::string& sysfs_root, const std::string& pci, const std::string& driver) {
  // Unbound (a rebind cut short between its two writes): only the bind is left to do.
  const bool bound = !link_basename(fs::path(sysfs_root) / "bus/pci/devices" / pci / "driver").empty();
  for (const char* verb : {"unbind", "bind"}) {
    if (!bound && verb[0] == 'u') continue;
    std::string path = sysfs_root + "/bus/pci/drivers/" + driver + "/" + verb;
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return fail_errno(errno, std::string(verb) + " PCI device " + pci + " (open " + path + ")");
    ssize_t n = ::write(fd, pci.data(), pci.size());
    int err = n < 0 ? errno : 0;
    ::close(fd);
    if (err != 0) return fail_errno(err, std::string(verb) + " PCI device " + pci + " (write " + path + ")");
  }
  return {};
}

}  // namespace plumb::pci
