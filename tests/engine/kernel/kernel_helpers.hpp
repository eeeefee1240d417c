// Helpers of the kernel access layer's tests (tests/engine/kernel, tests/engine/netlink/socket_test.cpp): a netlink
// socket and namespaces opened or the case fails, a link read back by name, veth pairs, and
// reading iproute2's JSON (`ip -j`).
#pragma once

#include <doctest/doctest.h>

#include <rapidjson/document.h>

#include <string>
#include <utility>

#include "engine/kernel/link.hpp"
#include "engine/base/netns.hpp"
#include "engine/netlink/socket.hpp"
#include "tests/engine/netlink/require_ok.hpp"
#include "tests/support/literals.hpp"

namespace plumb::test::kernel {

using plumb::test::ip;
using plumb::test::mac;
using plumb::test::prefix;

/// A netlink socket of `protocol` in the calling thread's namespace.
inline netlink::Socket open_socket(int protocol = NETLINK_ROUTE) {
  auto s = netlink::Socket::open(protocol);
  REQUIRE_OK(s);
  return std::move(*s);
}

inline netns::Netns open_ns(const std::string& path) {
  auto n = netns::Netns::open(path);
  REQUIRE_OK(n);
  return std::move(*n);
}


inline link::LinkInfo must_get(netlink::Socket& nl, const std::string& name) {
  auto l = link::get(nl, name);
  REQUIRE_OK(l);
  INFO("link ", name);
  REQUIRE(l->has_value());
  return **l;
}

inline bool has_flag(const rapidjson::Value& link, const char* flag) {
  for (const auto& f : link["flags"].GetArray()) {
    if (std::string(f.GetString()) == flag) return true;
  }
  return false;
}

inline std::string str(const rapidjson::Value& v, const char* key) {
  REQUIRE(v.HasMember(key));
  return v[key].GetString();
}

/// Creates a veth pair host/peer, both in the node (peer_netns_fd -1) or the peer in a namespace.
inline void make_veth(netlink::Socket& nl, const std::string& host, const std::string& peer, int peer_fd = -1) {
  link::VethSpec spec;
  spec.host_name = host;
  spec.peer_name = peer;
  spec.peer_netns_fd = peer_fd;
  REQUIRE_OK(link::create_veth(nl, spec));
}

inline void set_up(netlink::Socket& nl, const std::string& name) {
  link::LinkChange ch;
  ch.up = true;
  REQUIRE_OK(link::modify(nl, must_get(nl, name).index, ch));
}

}  // namespace plumb::test::kernel
