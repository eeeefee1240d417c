// A state record for tests of engine/state (one bridge attachment with a link and an IPAM
// release to undo) and a file writer, shared by the state tests.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>

#include "engine/state/state.hpp"

namespace plumb::test {

/// A complete ("ready") record of container `cid`, key interface `cni_ifname`, attachment
/// `index` named `ifname` in the pod, network "blue".
inline state::AttachmentRecord record(const std::string& cid, const std::string& cni_ifname, int index,
                                      const std::string& ifname) {
  state::AttachmentRecord r;
  r.container_id = cid;
  r.cni_ifname = cni_ifname;
  r.index = index;
  r.ifname = ifname;
  r.network = "blue";
  r.phase = "ready";
  r.config.Parse(R"([{"type":"bridge"}])");
  r.undo.Parse(
      R"([{"op":"link_del","where":"node","name":"veth1"},{"op":"ipam_release","ipam":{},"network":"blue","ifname":"eth0"}])");
  return r;
}

/// Writes `text` to `path`, creating its directories.
inline void put(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::trunc) << text;
}

}  // namespace plumb::test
