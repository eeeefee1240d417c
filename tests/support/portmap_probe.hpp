// Helpers of the portmap driver's tests (tests/drivers/portmap_test.cpp): sockets created inside
// network namespaces, TCP/UDP/SCTP probes through a host port with bounded waits, the node of
// those tests (a bridge + portmap default network, a client namespace joined to the node by a
// veth: 198.51.100.2 / 2001:db8:100::2 -> node 198.51.100.1 / 2001:db8:100::1), and independent
// read-backs of the ruleset (`nft -j`) and of conntrack (/proc/net/nf_conntrack).
#pragma once

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include <rapidjson/document.h>
#include <rapidjson/stringbuffer.h>
#include <rapidjson/writer.h>

#include "tests/support/pod_fixture.hpp"

namespace plumb::test::portmap {

using plumb::test::Node;
using plumb::test::PodFixture;
using plumb::test::Proc;

/// How long a probe waits for what it expects. A bridge with hundreds of ports drops flooded
/// packets when the kernel's per-CPU backlog overflows (net.core.netdev_max_backlog; the drops
/// show in /proc/net/softnet_stat's second column: ~11,000 in one run of the 200-pod case here),
/// so a TCP handshake may need its SYN retransmissions (at 1 s and 3 s): kRetransmitWaitMs covers
/// them. kWaitMs bounds waits whose expected outcome is that nothing arrives, and UDP (nothing
/// retransmits it).
inline constexpr int kWaitMs = 2000;
inline constexpr int kRetransmitWaitMs = 7000;
inline constexpr const char* kNodeV4 = "198.51.100.1";
inline constexpr const char* kNodeV6 = "2001:db8:100::1";
inline constexpr const char* kClientV4 = "198.51.100.2";
inline constexpr const char* kClientV6 = "2001:db8:100::2";

// ---- sockets in namespaces -------------------------------------------------------------------

/// A socket created in network namespace `ns` ("" = the node). Closed on destruction.
class Sock {
 public:
  Sock() = default;
  Sock(const std::string& ns, int domain, int type, int proto = 0) {
    int self = -1, target = -1;
    if (!ns.empty()) {
      self = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
      target = open(ns.c_str(), O_RDONLY | O_CLOEXEC);
      REQUIRE(self >= 0);
      REQUIRE(target >= 0);
      REQUIRE(setns(target, CLONE_NEWNET) == 0);
    }
    fd_ = socket(domain, type | SOCK_CLOEXEC, proto);
    const int err = errno;
    if (!ns.empty()) {
      REQUIRE(setns(self, CLONE_NEWNET) == 0);
      close(self);
      close(target);
    }
    errno = err;
  }
  Sock(Sock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Sock& operator=(Sock&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~Sock() {
    if (fd_ >= 0) close(fd_);
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};

inline sockaddr_storage sockaddr_of(const std::string& ip, uint16_t port, socklen_t* len) {
  sockaddr_storage ss{};
  if (ip.find(':') == std::string::npos) {
    auto* s = reinterpret_cast<sockaddr_in*>(&ss);
    s->sin_family = AF_INET;
    s->sin_port = htons(port);
    REQUIRE(inet_pton(AF_INET, ip.c_str(), &s->sin_addr) == 1);
    *len = sizeof(sockaddr_in);
  } else {
    auto* s = reinterpret_cast<sockaddr_in6*>(&ss);
    s->sin6_family = AF_INET6;
    s->sin6_port = htons(port);
    REQUIRE(inet_pton(AF_INET6, ip.c_str(), &s->sin6_addr) == 1);
    *len = sizeof(sockaddr_in6);
  }
  return ss;
}

inline std::string ip_of(const sockaddr_storage& ss) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (ss.ss_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss)->sin_addr, buf, sizeof buf);
  } else {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof buf);
  }
  return buf;
}

inline std::string errtext(int err) { return std::string(std::strerror(err)) + " (" + std::to_string(err) + ")"; }

inline int family_of(const std::string& ip) { return ip.find(':') == std::string::npos ? AF_INET : AF_INET6; }

inline bool wait_for(int fd, short events, int ms = kWaitMs) {
  pollfd p{fd, events, 0};
  int r;
  do r = poll(&p, 1, ms);
  while (r < 0 && errno == EINTR);
  return r == 1;
}

/// A listener in a pod: TCP (listen) or UDP (bound), on the wildcard address of `family`.
inline Sock listener(const std::string& ns, int family, int type, uint16_t port, int proto = 0) {
  Sock s(ns, family, type, proto);
  REQUIRE(s.fd() >= 0);
  int one = 1;
  setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (family == AF_INET6) setsockopt(s.fd(), IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
  socklen_t len = 0;
  auto sa = sockaddr_of(family == AF_INET ? "0.0.0.0" : "::", port, &len);
  REQUIRE(bind(s.fd(), reinterpret_cast<sockaddr*>(&sa), len) == 0);
  if (type == SOCK_STREAM) REQUIRE(listen(s.fd(), 16) == 0);
  return s;
}

/// What one connection attempt saw.
struct Probe {
  bool ok = false;
  int err = 0;           // errno of the failure (ECONNREFUSED, ETIMEDOUT, ...)
  std::string peer;      // the source address the pod's listener saw
};

/// Binds client socket `c` (about to reach `dst`) to source port `src_port`; 0 leaves it to the kernel.
inline void bind_source_port(const Sock& c, const std::string& dst, uint16_t src_port) {
  if (src_port == 0) return;
  int one = 1;
  setsockopt(c.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  socklen_t l = 0;
  auto local = sockaddr_of(family_of(dst) == AF_INET ? "0.0.0.0" : "::", src_port, &l);
  REQUIRE(bind(c.fd(), reinterpret_cast<sockaddr*>(&local), l) == 0);
}

/// TCP (or SCTP with proto IPPROTO_SCTP): connects from namespace `from` to dst:port, expects the connection on `server` (a listener
/// in the pod), checks a byte both ways.
inline Probe tcp_probe(const std::string& from, const std::string& dst, uint16_t port, const Sock& server,
                uint16_t src_port = 0, int proto = 0, int wait_ms = kRetransmitWaitMs) {
  Probe p;
  Sock c(from, family_of(dst), SOCK_STREAM | SOCK_NONBLOCK, proto);
  REQUIRE(c.fd() >= 0);
  bind_source_port(c, dst, src_port);
  socklen_t len = 0;
  auto sa = sockaddr_of(dst, port, &len);
  if (connect(c.fd(), reinterpret_cast<sockaddr*>(&sa), len) != 0 && errno != EINPROGRESS) {
    p.err = errno;
    return p;
  }
  if (!wait_for(c.fd(), POLLOUT, wait_ms)) {
    p.err = ETIMEDOUT;
    return p;
  }
  int soerr = 0;
  socklen_t sl = sizeof soerr;
  getsockopt(c.fd(), SOL_SOCKET, SO_ERROR, &soerr, &sl);
  if (soerr != 0) {
    p.err = soerr;
    return p;
  }
  if (!wait_for(server.fd(), POLLIN, wait_ms)) {
    p.err = EHOSTUNREACH;  // connected somewhere, but not to this pod's listener
    return p;
  }
  sockaddr_storage peer{};
  socklen_t pl = sizeof peer;
  const int fd = accept4(server.fd(), reinterpret_cast<sockaddr*>(&peer), &pl, SOCK_CLOEXEC);
  REQUIRE(fd >= 0);
  p.peer = ip_of(peer);
  const bool sent = write(fd, "pong", 4) == 4;
  if (sent && wait_for(c.fd(), POLLIN, wait_ms)) {
    char buf[8] = {};
    p.ok = read(c.fd(), buf, sizeof buf) == 4 && std::string(buf, 4) == "pong";
  }
  close(fd);
  if (!p.ok && p.err == 0) p.err = EIO;
  return p;
}

/// UDP: sends from namespace `from` (connected socket, so ICMP errors are reported) to dst:port,
/// expects the datagram on `server` (bound in the pod) and the answer back.
inline Probe udp_probe(const std::string& from, const std::string& dst, uint16_t port, const Sock& server,
                uint16_t src_port = 0) {
  Probe p;
  Sock c(from, family_of(dst), SOCK_DGRAM);
  REQUIRE(c.fd() >= 0);
  bind_source_port(c, dst, src_port);
  socklen_t len = 0;
  auto sa = sockaddr_of(dst, port, &len);
  REQUIRE(connect(c.fd(), reinterpret_cast<sockaddr*>(&sa), len) == 0);
  REQUIRE(send(c.fd(), "ping", 4, 0) == 4);
  if (!wait_for(server.fd(), POLLIN)) {
    // Nothing reached the pod: report what the client got (ICMP port unreachable or nothing).
    char buf[8];
    if (wait_for(c.fd(), POLLIN | POLLERR, 300) && recv(c.fd(), buf, sizeof buf, MSG_DONTWAIT) < 0) {
      p.err = errno;
    } else {
      p.err = ETIMEDOUT;
    }
    return p;
  }
  sockaddr_storage peer{};
  socklen_t pl = sizeof peer;
  char buf[16] = {};
  ssize_t n = recvfrom(server.fd(), buf, sizeof buf, 0, reinterpret_cast<sockaddr*>(&peer), &pl);
  REQUIRE(n == 4);
  p.peer = ip_of(peer);
  REQUIRE(sendto(server.fd(), "pong", 4, 0, reinterpret_cast<sockaddr*>(&peer), pl) == 4);
  if (wait_for(c.fd(), POLLIN)) {
    char r[8] = {};
    p.ok = recv(c.fd(), r, sizeof r, 0) == 4 && std::string(r, 4) == "pong";
  }
  if (!p.ok) p.err = EIO;
  return p;
}

/// TCP connect expected to be refused by the node (no DNAT any more): ECONNREFUSED.
inline int tcp_connect_error(const std::string& from, const std::string& dst, uint16_t port) {
  Sock c(from, family_of(dst), SOCK_STREAM | SOCK_NONBLOCK);
  socklen_t len = 0;
  auto sa = sockaddr_of(dst, port, &len);
  if (connect(c.fd(), reinterpret_cast<sockaddr*>(&sa), len) != 0 && errno != EINPROGRESS) return errno;
  if (!wait_for(c.fd(), POLLOUT, kRetransmitWaitMs)) return ETIMEDOUT;
  int soerr = 0;
  socklen_t sl = sizeof soerr;
  getsockopt(c.fd(), SOL_SOCKET, SO_ERROR, &soerr, &sl);
  return soerr;
}

// ---- SCTP without an SCTP stack: raw INIT chunks ----------------------------------------------

/// CRC32c (Castagnoli, reflected), as SCTP uses it (RFC 9260 appendix A).
inline uint32_t crc32c(const uint8_t* p, size_t n) {
  uint32_t crc = 0xffffffffu;
  for (size_t i = 0; i < n; ++i) {
    crc ^= p[i];
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1u)));
  }
  return ~crc;
}

/// An SCTP packet with one INIT chunk (common header with verification tag 0, checksum set).
inline std::vector<uint8_t> sctp_init(uint16_t sport, uint16_t dport) {
  std::vector<uint8_t> b = {
      static_cast<uint8_t>(sport >> 8), static_cast<uint8_t>(sport), static_cast<uint8_t>(dport >> 8),
      static_cast<uint8_t>(dport), 0, 0, 0, 0,  // verification tag 0 (INIT)
      0, 0, 0, 0,                               // checksum, below
      1, 0, 0, 20,                              // INIT, flags 0, length 20
      0x0a, 0x0b, 0x0c, 0x0d,                   // initiate tag
      0, 1, 0, 0,                               // a_rwnd 65536
      0, 1, 0, 1,                               // 1 outbound, 1 inbound stream
      0, 0, 0, 1};                              // initial TSN
  const uint32_t c = crc32c(b.data(), b.size());
  for (int i = 0; i < 4; ++i) b[8 + i] = static_cast<uint8_t>(c >> (8 * i));  // little endian, as Linux
  return b;
}

/// True when an SCTP packet's checksum is valid.
inline bool sctp_checksum_ok(const uint8_t* p, size_t n) {
  if (n < 12) return false;
  std::vector<uint8_t> copy(p, p + n);
  uint32_t stored = 0;
  for (int i = 0; i < 4; ++i) stored |= static_cast<uint32_t>(copy[8 + i]) << (8 * i);
  std::fill(copy.begin() + 8, copy.begin() + 12, 0);
  return crc32c(copy.data(), copy.size()) == stored;
}

// ---- the node, the client and plumb ---------------------------------------------------------

/// The default network: bridge (dual stack, gateway, ipMasq) + portmap (`portmap_keys` added to
/// its object) + loopback.
inline void write_default_network(const PodFixture& fx, const std::string& portmap_keys = "") {
  plumb::test::write_file(fx.default_conflist(), R"({
  "cniVersion": "1.0.0", "name": "default-net",
  "plugins": [
    {"type": "bridge", "bridge": "plumb0", "isGateway": true, "isDefaultGateway": true, "ipMasq": true,
     "hairpinMode": true, "ipam": {"type": "host-local", "dataDir": ")" + fx.ipam_dir() + R"(",
              "ranges": [[{"subnet": "203.0.113.0/24"}], [{"subnet": "2001:db8:0:1::/64"}]]}},
    {"type": "portmap", "capabilities": {"portMappings": true})" +
                                                  (portmap_keys.empty() ? "" : ", " + portmap_keys) + R"(},
    {"type": "loopback"}
  ]})");
}

/// The client namespace and its veth to the node.
inline std::string add_client(Node& node) {
  std::string ns = node.add_netns("client");
  Proc p = plumb::test::sh(
      "set -e\n"
      "ip link add vclient type veth peer name eth0 netns client\n"
      "ip addr add 198.51.100.1/24 dev vclient && ip addr add 2001:db8:100::1/64 dev vclient nodad\n"
      "ip link set vclient up\n"
      "ip -n client addr add 198.51.100.2/24 dev eth0 && ip -n client addr add 2001:db8:100::2/64 dev eth0 nodad\n"
      "ip -n client link set eth0 up\n"
      "ip -n client route add default via 198.51.100.1\n"
      "ip -n client -6 route add default via 2001:db8:100::1\n");
  INFO(p.err);
  REQUIRE(p.exit_code == 0);
  return ns;
}

inline std::string mapping_json(int host_port, int container_port, const std::string& proto, const std::string& host_ip = "") {
  std::string s = R"({"hostPort": )" + std::to_string(host_port) + R"(, "containerPort": )" +
                  std::to_string(container_port) + R"(, "protocol": ")" + proto + R"(")";
  if (!host_ip.empty()) s += R"(, "hostIP": ")" + host_ip + R"(")";
  return s + "}";
}

inline std::string config_with(const PodFixture& fx, const std::vector<std::string>& mappings) {
  std::string list;
  for (auto& m : mappings) list += (list.empty() ? "" : ", ") + m;
  return fx.config(R"("runtimeConfig": {"portMappings": [)" + list + "]}");
}

/// The pod's addresses from an ADD result: family -> address, and gateways.
struct PodIps {
  std::string v4, v6, gw4, gw6;
};
inline PodIps pod_ips(const std::string& result) {
  rapidjson::Document d;
  d.Parse(result.c_str());
  REQUIRE(d.IsObject());
  PodIps out;
  for (auto& ip : d["ips"].GetArray()) {
    std::string a = ip["address"].GetString();
    a = a.substr(0, a.find('/'));
    std::string gw = ip.HasMember("gateway") ? ip["gateway"].GetString() : "";
    if (a.find(':') == std::string::npos) {
      out.v4 = a;
      out.gw4 = gw;
    } else {
      out.v6 = a;
      out.gw6 = gw;
    }
  }
  REQUIRE_FALSE(out.v4.empty());
  REQUIRE_FALSE(out.v6.empty());
  return out;
}

/// Runs ADD for pod `name` (netns created here) with container ID "ctr-<name>"; returns its IPs.
inline PodIps add_pod(Node& node, const PodFixture& fx, const std::string& name, const std::vector<std::string>& mappings) {
  std::string ns = node.add_netns(name);
  fx.add_pod("default", name, "");
  Proc add = fx.run("ADD", "ctr-" + name, ns, "default", name, config_with(fx, mappings));
  INFO("ADD ", name, ": ", add.out, "\n", add.err);
  REQUIRE(add.exit_code == 0);
  return pod_ips(add.out);
}

inline Proc del_pod(const PodFixture& fx, const std::string& name, const std::vector<std::string>& mappings) {
  return fx.run("DEL", "ctr-" + name, "/run/netns/" + name, "default", name, config_with(fx, mappings));
}

/// Waits (bounded, 5 s) until no IPv6 address of the interfaces is tentative any more: the
/// link-local addresses of fresh veths and bridges run duplicate address detection, and IPv6
/// neighbour discovery right after that is unreliable. `where` holds "<netns> <dev>" pairs
/// ("" netns = the node).
inline void wait_ipv6_settled(const std::vector<std::pair<std::string, std::string>>& where) {
  for (int i = 0; i < 50; ++i) {
    bool tentative = false;
    for (auto& [ns, dev] : where) {
      Proc p = plumb::test::sh("ip " + (ns.empty() ? std::string() : "-n " + ns + " ") + "-6 addr show dev " + dev);
      tentative |= p.out.find("tentative") != std::string::npos;
    }
    if (!tentative) return;
    usleep(100 * 1000);
  }
  FAIL("IPv6 addresses still tentative after 5 s");
}

// ---- the ruleset, read back with nft -j ------------------------------------------------------

inline rapidjson::Document nft_table() {
  Proc p = plumb::test::sh("nft -j list table inet plumb");
  INFO(p.err);
  REQUIRE(p.exit_code == 0);
  rapidjson::Document d;
  d.Parse(p.out.c_str());
  REQUIRE(d.IsObject());
  return d;
}

inline size_t rule_count(const rapidjson::Document& d) {
  size_t n = 0;
  for (auto& o : d["nftables"].GetArray()) n += o.HasMember("rule") ? 1 : 0;
  return n;
}

/// Elements of a set or map of table inet plumb (as nft -j prints them), empty if none.
inline std::vector<std::string> elements(const rapidjson::Document& d, const std::string& set) {
  std::vector<std::string> out;
  for (auto& o : d["nftables"].GetArray()) {
    const char* kind = o.HasMember("map") ? "map" : o.HasMember("set") ? "set" : nullptr;
    if (kind == nullptr || set != o[kind]["name"].GetString() || !o[kind].HasMember("elem")) continue;
    for (auto& e : o[kind]["elem"].GetArray()) {
      rapidjson::StringBuffer sb;
      rapidjson::Writer<rapidjson::StringBuffer> w(sb);
      e.Accept(w);
      out.push_back(sb.GetString());
    }
  }
  return out;
}

inline std::string nft_text() { return plumb::test::sh("nft list table inet plumb").out; }

/// Lines of /proc/net/nf_conntrack (this namespace) for a protocol and destination port.
inline std::vector<std::string> conntrack_lines(const std::string& proto, int dport) {
  std::vector<std::string> out;
  std::string all = plumb::test::read_file("/proc/net/nf_conntrack");
  size_t pos = 0;
  while (pos < all.size()) {
    size_t nl = all.find('\n', pos);
    std::string line = all.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? all.size() : nl + 1;
    if (line.find(" " + proto + " ") != std::string::npos && line.find("dport=" + std::to_string(dport) + " ") != std::string::npos) {
      out.push_back(line);
    }
  }
  return out;
}

}  // namespace plumb::test::portmap
