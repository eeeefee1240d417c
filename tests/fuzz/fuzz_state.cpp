// libFuzzer target: what DEL, GC, CHECK and a repeated ADD read back after a crash, a disk error
// or a hand edit, and the network-status ADD records from what plugins returned.
//  - State records (engine/state/record.cpp): any text either decodes into a record that encodes
//    and decodes again to the same record, or is refused, naming the file, as damaged (kDecode)
//    or as a newer plumb's (kNewerRecord); the undo list of a record that decodes is checked as
//    DEL checks it before running any operation (drivers/undo.cpp): read whole, or refused with
//    kDecode/kNewerRecord naming the record's path.
//  - network-status (NPWG 5): any text a delegated plugin may print as its result, decoded in
//    every version, becomes a status entry (and device-info when the text is one) whose encoded
//    annotation passes the 5.x checks and reads back as one entry per attachment.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "cni-entry/npwg/nad.hpp"
#include "drivers/undo.hpp"
#include "engine/base/json.hpp"
#include "engine/cni/cni.hpp"
#include "engine/devinfo/devinfo.hpp"
#include "engine/state/state.hpp"

namespace {

constexpr std::string_view kPath = "/fuzz/containers/c:eth0/0-eth0.json";

void record(std::string_view text) {
  auto rec = plumb::state::decode(text, std::string(kPath));
  if (!rec) {
    const unsigned code = rec.error().cni_code;
    if (code != plumb::cni_code::kDecode && code != plumb::cni_code::kNewerRecord) __builtin_trap();
    if (rec.error().msg.find(kPath) == std::string::npos) __builtin_trap();  // named by path
    return;
  }
  if (!rec->undo.IsArray()) __builtin_trap();
  if (auto st = plumb::drivers::undo::check(rec->undo, std::string(kPath)); !st) {
    const unsigned code = st.error().cni_code;
    if (code != plumb::cni_code::kDecode && code != plumb::cni_code::kNewerRecord) __builtin_trap();
    if (st.error().msg.find(kPath) == std::string::npos) __builtin_trap();  // names the record
  } else {
    for (const auto& v : rec->undo.GetArray()) {  // what DEL would run re-encodes as it was read
      auto op = plumb::drivers::undo::decode(v, std::string(kPath));
      if (!op) __builtin_trap();
      auto again = plumb::drivers::undo::decode(plumb::drivers::undo::encode(*op), std::string(kPath));
      if (!again || plumb::drivers::undo::name_of(*again) != plumb::drivers::undo::name_of(*op)) __builtin_trap();
    }
  }
  auto back = plumb::state::decode(plumb::state::encode(*rec), "re-encoded");
  if (!back) __builtin_trap();  // what plumb writes it reads
  if (back->container_id != rec->container_id || back->index != rec->index || back->ifname != rec->ifname ||
      back->phase != rec->phase || plumb::json::dump(back->undo) != plumb::json::dump(rec->undo) ||
      plumb::json::dump(back->config) != plumb::json::dump(rec->config)) {
    __builtin_trap();
  }
  if (rec->result.IsObject()) (void)plumb::cni::decode_result(rec->result, "1.1.0");  // as CHECK reads it
}

void network_status(std::string_view text) {
  auto doc = plumb::json::parse(text, "fuzz input");
  if (!doc) return;
  std::vector<plumb::nad::StatusEntry> entries;
  for (const auto& version : plumb::cni::supported_versions()) {
    auto r = plumb::cni::decode_result(*doc, version);
    if (r) entries.push_back(plumb::nad::status_from_result("ns/net-" + version, *r, "net1", entries.empty()));
  }
  if (plumb::devinfo::validate(*doc, "fuzz device-info")) {
    plumb::nad::StatusEntry e;
    e.name = "ns/devinfo";
    e.is_default = entries.empty();
    e.device_info = plumb::json::clone(*doc);
    entries.push_back(std::move(e));
  }
  if (entries.empty()) return;
  if (!plumb::nad::check_network_status(entries)) __builtin_trap();  // exactly one default, every entry named
  auto back = plumb::json::parse(plumb::nad::encode_network_status(entries), "network-status", 2 * plumb::json::kMaxDepth);
  if (!back || !back->IsArray() || back->Size() != entries.size()) __builtin_trap();
  for (const auto& e : back->GetArray()) {
    if (!e.IsObject() || !e.HasMember("name") || !e["name"].IsString() || !e.HasMember("default")) __builtin_trap();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  record(text);
  network_status(text);
  return 0;
}
