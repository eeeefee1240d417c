// plumb-floor: the kernel floor of one pod's attachments, for the latency bench (bench/, plumb-bench).
// It does only the kernel operations the bench's scenarios need, with no config parsing, no
// state, no IPAM files, no journal: names, addresses and ports come from argv, objects plumb
// set up once per node (bridges with their gateway address, table `inet plumb` with its maps and
// chains, the pinned bandwidth programs) are taken as given. What is left is the cost the kernel
// charges for the attachment plus one process start, which is what plumb is measured against.
//
//   plumb-floor ADD|DEL|DEL-NAIVE <a|b|c> <pod netns path> <slot> <host port> <bpffs dir>
//   plumb-floor serve <socket> <bpffs dir>    the warm floor ("floor-warm"), below
//   plumb-floor START                          exits 0 at once: its process start-up alone
//
// Scenario a: default network (bridge cni0, 2001:db8:0:1::/64, gateway ::1, masquerade element).
// Scenario b: a + net1 on bridge br1 (2001:db8:0:2::/64) + net2 macvlan on mst0 (2001:db8:0:3::/64).
// Scenario c: b + host port <host port>/tcp -> [pod]:80 (DNAT map, owner and hairpin elements) and
//             bandwidth on the default network's host veth (two state map entries, clsact, two
//             cls_bpf filters).
// Pod addresses are 2001:db8:0:<net>::1:0 + slot (outside the bench's host-local ranges), host
// veth names fl<slot> / fm<slot> (hex). Messages per ADD of scenario c: 3 link creates (the
// veths' host ends echoed), 2 link sets (pod ends up, with arp_notify), 6 link lookups (the bridges, the macvlan
// master, each pod end: read right after its creation, which runs its pending link event at once
// and made ADDs faster, not slower), 3 address adds, 1 route add, 1 nftables transaction (4
// elements), 2 BPF map updates, 3 tc messages (4 with the fq root qdisc of EDT mode).
// The pod-side devices are created in link group kPodLinkGroup (an attribute of the creating
// message: free), as plumb creates them. DEL deletes them with one RTM_DELLINK of that group in
// the pod namespace (the kernel's device unregistration, an RCU synchronisation, paid once per
// pod: the batching plumb does); DEL-NAIVE deletes each device with its own RTM_DELLINK (paid
// once per device, as the reference plugins do), the floor without that batching.
// Exit status 0 on success; 1 with the failed operation on stderr otherwise.
//
// The warm floor: `serve` listens on a unix socket and does the same operations in an
// already-running process, for plumb-shim (cni-entry/shim/shim.cpp) exec'd per verb, speaking
// plumb daemon's protocol (cni-entry/daemon/wire.hpp): what thick mode pays at least, the
// exec of a minimal static program, its wake-up of a waiting thread, the kernel's work and the
// exit status sent back. The verb comes from CNI_COMMAND, the pod namespace from CNI_NETNS and
// the rest from CNI_ARGS (FLOOR_SCENARIO, FLOOR_SLOT, FLOOR_PORT). Each of its threads waits in
// accept() and keeps its node rtnetlink socket, nfnetlink session and bandwidth programs open
// between requests, as a warm worker does; failures go to the shim's stderr, never end the server.
//
// Built fully static (bench/CMakeLists.txt), as plumb is: no dynamic loading at its start.
// netinet/in.h before the linux/ headers: glibc then keeps linux/in.h from redefining it. Kept
// out of include sorting, which (IncludeBlocks: Regroup) would move it after <linux/in.h>.
// clang-format off
#include <netinet/in.h>
// clang-format on

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "cni-entry/daemon/recv_fds.hpp"
#include "cni-entry/daemon/wire.hpp"
#include "ebpf/loader.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/kernel/link.hpp"
#include "engine/kernel/route.hpp"
#include "engine/kernel/tc.hpp"
#include "engine/netlink/socket.hpp"
#include "engine/nft/nfnl.hpp"
#include "engine/nft/nft.hpp"
#include "engine/nft/objects.hpp"
#include "engine/nft/portmap.hpp"
#include "engine/nft/portmap_objects.hpp"

namespace {

using plumb::IpAddr;
using plumb::IpPrefix;
using plumb::Result;
using plumb::Status;
namespace netlink = plumb::netlink;
namespace nft = plumb::nft;
namespace ebpf = plumb::ebpf;

struct Args {
  bool add = true;
  bool batched_del = true;
  char scenario = 'a';
  std::string netns;
  unsigned slot = 0;
  uint16_t host_port = 0;
  std::string bpffs;
};

constexpr const char* kMasqChain = "masq-default-net";  // plumb's chain of network "default-net"
constexpr uint64_t kOwnerBase = 0xf100000000000000ull;  // bandwidth map owner: base + slot

/// An operation failed: main prints it and exits 1, the server writes it to the shim's stderr.
[[noreturn]] void die(const std::string& what) { throw std::runtime_error(what); }

template <class T>
T must(Result<T> r, const char* what) {
  if (!r) die(std::string(what) + ": " + r.error().text());
  return std::move(*r);
}
void must(const Status& st, const char* what) {
  if (!st) die(std::string(what) + ": " + st.error().text());
}

/// What stays open between the operations of one thread: nothing in a one-shot run (each is
/// opened on first use), everything in a warm server thread.
struct Warm {
  std::optional<netlink::Socket> node;
  std::optional<nft::nfnl::Session> nft;
  std::optional<ebpf::Programs> progs;
  std::string bpffs;
  netlink::Socket& node_socket() {
    if (!node) node.emplace(must(netlink::Socket::open(), "open rtnetlink socket"));
    return *node;
  }
  nft::nfnl::Session& nft_session() {
    if (!nft) nft.emplace(must(nft::nfnl::Session::open(), "open nfnetlink"));
    return *nft;
  }
  ebpf::Programs& programs() {
    if (!progs) {
      progs = must(ebpf::Programs::open_existing(bpffs), "open pinned bandwidth programs");
      if (!progs) die("no bandwidth programs pinned under " + bpffs + " (plumb loads them on its first ADD)");
    }
    return *progs;
  }
};

/// 2001:db8:0:<net>::<offset>.
IpAddr net_addr(unsigned net, uint64_t offset) {
  IpAddr a;
  a.family = AF_INET6;
  a.bytes = {0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, static_cast<uint8_t>(net), 0, 0, 0, 0, 0, 0, 0, 0};
  return a.plus(offset);
}
/// 2001:db8:0:<net>::1:0 + slot.
IpAddr pod_addr(unsigned net, unsigned slot) { return net_addr(net, 0x10000 + slot); }

std::string hex_name(const char* prefix, unsigned slot) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%s%x", prefix, slot);
  return buf;
}

int index_of(netlink::Socket& nl, const std::string& name) {
  auto l = must(plumb::link::get(nl, name), "look up link");
  if (!l) die("link " + name + " does not exist");
  return l->index;
}

/// One RTM_NEWLINK: a veth whose host end is enslaved to `master` and up, whose peer is born in
/// the pod namespace under its final name (down: the kernel refuses to open a veth end before
/// its peer is registered, ENOTCONN). Returns the host end's index from the kernel's echo of it
/// (NLM_F_ECHO, Linux >= 6.1), as plumb takes it; a kernel that echoes nothing costs a lookup.
int create_veth(netlink::Socket& node, const std::string& host, int master, const std::string& peer, int netns_fd) {
  plumb::link::VethSpec spec;
  spec.host_name = host;
  spec.peer_name = peer;
  spec.peer_netns_fd = netns_fd;
  spec.peer_group = plumb::link::kPodLinkGroup;
  spec.host_master_index = master;
  spec.host_up = true;
  auto echoed = must(plumb::link::create_veth(node, spec), "create veth");
  return echoed ? echoed->index : index_of(node, host);
}

/// One RTM_NEWLINK: a bridge-mode macvlan on `master` born in the pod namespace as `name`, up.
void create_macvlan(netlink::Socket& node, int master, const std::string& name, int netns_fd) {
  netlink::Message m(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
  auto* ifi = m.put_header<ifinfomsg>();
  ifi->ifi_flags = IFF_UP;
  ifi->ifi_change = IFF_UP;
  m.put_str(IFLA_IFNAME, name);
  m.put_u32(IFLA_LINK, static_cast<uint32_t>(master));
  m.put_u32(IFLA_NET_NS_FD, static_cast<uint32_t>(netns_fd));
  m.put_u32(IFLA_GROUP, plumb::link::kPodLinkGroup);
  {
    netlink::Message::Nest linkinfo(m, IFLA_LINKINFO);
    m.put_str(IFLA_INFO_KIND, "macvlan");
    netlink::Message::Nest data(m, IFLA_INFO_DATA);
    m.put_u32(IFLA_MACVLAN_MODE, MACVLAN_MODE_BRIDGE);
  }
  must(node.request(m, "create macvlan " + name), "create macvlan");
}

/// The pod end of a veth: address, then up with arp_notify (as the reference bridge and plumb
/// leave it; IPv6 only: nothing to announce, set in the same message). Returns its index.
int configure_veth_peer(netlink::Socket& pod, const std::string& ifname, const IpAddr& a) {
  const int index = index_of(pod, ifname);
  must(plumb::addr::add(pod, index, IpPrefix{a, 64}, /*nodad=*/true), "add address");
  plumb::link::LinkChange up;
  up.up = true;
  up.arp_notify = true;
  must(plumb::link::modify(pod, index, up), "set pod interface up");
  return index;
}

/// The nftables elements of the pod (masquerade; in scenario c also the port mapping), added or
/// deleted in one transaction, exactly the elements plumb installs.
void nft_elements(const Args& a, const IpAddr& pod, nft::nfnl::Session& session) {
  auto batch = session.batch();
  const uint16_t type = a.add ? NFT_MSG_NEWSETELEM : NFT_MSG_DELSETELEM;
  const uint16_t excl = a.add ? NLM_F_CREATE | NLM_F_EXCL : 0;
  auto masq = nft::obj::map_element(nft::kTableName, "masq6", pod, a.add ? kMasqChain : "");
  batch->add_elems(type, excl, masq.get(), "masquerade element");
  nft::obj::Set owners, dnat, hairpin;
  if (a.scenario == 'c') {
    const std::string cid = "floor-" + std::to_string(a.slot);
    owners = nft::pmobj::set_ref(nft::kTableName, nft::pmobj::kOwners);
    nft::pmobj::add_element(owners.get(), nft::pmobj::owner_key(AF_INET6, IPPROTO_TCP, std::nullopt, a.host_port,
                                                                nft::owner_tag(cid, "eth0")));
    batch->add_elems(type, excl, owners.get(), "port owner element");
    dnat = nft::pmobj::set_ref(nft::kTableName, nft::pmobj::dnat_map_name(AF_INET6, false));
    nft::pmobj::add_element(dnat.get(), nft::pmobj::dnat_key(IPPROTO_TCP, std::nullopt, a.host_port),
                            a.add ? nft::pmobj::dnat_data(pod, 80) : std::vector<uint8_t>{}, a.add ? cid + "/eth0" : "");
    batch->add_elems(type, excl, dnat.get(), "DNAT element");
    hairpin = nft::pmobj::set_ref(nft::kTableName, nft::pmobj::hairpin_set_name(AF_INET6));
    nft::pmobj::add_element(hairpin.get(), nft::pmobj::addr_key(pod, true));
    batch->add_elems(type, a.add ? NLM_F_CREATE : 0, hairpin.get(), "hairpin element");
  }
  must(batch->finish(), "build nftables batch");
  auto out = must(session.send(*batch), "send nftables batch");
  if (!out.ok()) die("nftables transaction: " + nft::nfnl::to_error(*batch, out).text());
}

void bandwidth_add(netlink::Socket& node, const Args& a, int host_index, ebpf::Programs& progs) {
  const ebpf::Limit limit{100'000'000, 1'000'000};
  must(plumb::tc::add_clsact(node, host_index), "add clsact");
  for (ebpf::Hook h : {ebpf::Hook::HostIngress, ebpf::Hook::HostEgress}) {
    must(progs.configure(host_index, h, limit, kOwnerBase + a.slot), "configure bandwidth state");
    must(plumb::tc::attach(node, host_index, ebpf::clsact_hook(h), progs.prog_fd(h), progs.prog_name(h)),
         "attach bandwidth filter");
  }
  // EDT mode (the kernel has sch_fq): the pod's ingress limit also needs fq as root qdisc.
  if (progs.mode() == ebpf::Mode::EdtFq) must(plumb::tc::set_root_fq(node, host_index), "set fq root qdisc");
}

void bandwidth_del(const Args& a, int host_index, ebpf::Programs& progs) {
  for (ebpf::Hook h : {ebpf::Hook::HostIngress, ebpf::Hook::HostEgress}) {
    must(progs.remove(host_index, h, kOwnerBase + a.slot), "remove bandwidth state");
  }
}

/// Checks and stores the verb and the scenario.
void set_verb_scenario(Args& a, const std::string& verb, const std::string& s) {
  if (verb != "ADD" && verb != "DEL" && verb != "DEL-NAIVE") die("verb must be ADD, DEL or DEL-NAIVE, not " + verb);
  a.add = verb == "ADD";
  a.batched_del = verb == "DEL";
  if (s != "a" && s != "b" && s != "c") die("scenario must be a, b or c, not \"" + s + "\"");
  a.scenario = s[0];
}

unsigned long number(const std::string& what, const std::string& s, unsigned long below) {
  char* end = nullptr;
  errno = 0;
  const unsigned long v = std::strtoul(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || errno != 0 || v >= below)
    die(what + " must be a number below " + std::to_string(below) + ", not \"" + s + "\"");
  return v;
}

Args parse_args(int argc, char** argv) {
  if (argc != 7)
    die("usage: plumb-floor ADD|DEL|DEL-NAIVE a|b|c <pod netns> <slot> <host port> <bpffs dir> | serve <socket> <bpffs "
        "dir>");
  Args a;
  set_verb_scenario(a, argv[1], argv[2]);
  a.netns = argv[3];
  a.slot = static_cast<unsigned>(number("slot", argv[4], 0x10000));
  a.host_port = static_cast<uint16_t>(number("host port", argv[5], 0x10000));
  a.bpffs = argv[6];
  return a;
}

/// The attachment's kernel operations (ADD) or their undoing (DEL, DEL-NAIVE).
void run(const Args& a, Warm& w) {
  const int nsfd = open(a.netns.c_str(), O_RDONLY | O_CLOEXEC);
  if (nsfd < 0) die("open " + a.netns + ": " + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{nsfd};
  netlink::Socket& node = w.node_socket();
  auto pod = must(netlink::Socket::open_in(nsfd), "open rtnetlink socket in the pod");
  const IpAddr ip0 = pod_addr(1, a.slot);
  const std::string host0 = hex_name("fl", a.slot), host1 = hex_name("fm", a.slot);
  const bool secondaries = a.scenario != 'a';

  if (a.add) {
    const int host0_index = create_veth(node, host0, index_of(node, "cni0"), "eth0", nsfd);
    const int eth0 = configure_veth_peer(pod, "eth0", ip0);
    plumb::route::Route def;
    def.dst = IpPrefix{IpAddr{AF_INET6, {}}, 0};
    def.gw = net_addr(1, 1);
    def.oif = eth0;
    must(plumb::route::add(pod, def), "add default route");
    nft_elements(a, ip0, w.nft_session());
    if (secondaries) {
      create_veth(node, host1, index_of(node, "br1"), "net1", nsfd);
      configure_veth_peer(pod, "net1", pod_addr(2, a.slot));
      create_macvlan(node, index_of(node, "mst0"), "net2", nsfd);
      must(plumb::addr::add(pod, index_of(pod, "net2"), IpPrefix{pod_addr(3, a.slot), 64}, /*nodad=*/true), "add address");
    }
    if (a.scenario == 'c') bandwidth_add(node, a, host0_index, w.programs());
  } else {
    if (a.scenario == 'c') bandwidth_del(a, index_of(node, host0), w.programs());
    nft_elements(a, ip0, w.nft_session());
    if (a.batched_del) {
      if (!must(plumb::link::remove_group(pod, plumb::link::kPodLinkGroup), "delete the pod's links")) die("no pod link to delete");
    } else {
      must(plumb::link::remove(node, host0), "delete host veth");
      if (secondaries) {
        must(plumb::link::remove(node, host1), "delete host veth of net1");
        must(plumb::link::remove(pod, "net2"), "delete macvlan net2");
      }
    }
  }
}

namespace wire = plumb::daemon_wire;

/// The value of `key` in CNI_ARGS-style "K=V;K=V" text ("" when absent).
std::string cni_arg(const std::string& args, const std::string& key) {
  for (size_t pos = 0; pos <= args.size();) {
    size_t end = args.find(';', pos);
    if (end == std::string::npos) end = args.size();
    const std::string kv = args.substr(pos, end - pos);
    if (kv.rfind(key + "=", 0) == 0) return kv.substr(key.size() + 1);
    pos = end + 1;
  }
  return "";
}

/// One request of a shim on `conn`: the request body with its descriptors (stdin, stdout,
/// stderr), the operations, the exit status back.
void serve_one(int conn, Warm& w) {
  static thread_local std::vector<char> body(wire::kMaxRequestBytes);
  int fds[3] = {-1, -1, -1};
  int nfds = 0;
  const ssize_t n = wire::recv_with_fds(conn, body.data(), body.size(), fds, 3, nfds);
  int code = 0;
  try {
    if (n < static_cast<ssize_t>(sizeof wire::kRequestMagic) ||
        std::memcmp(body.data(), wire::kRequestMagic, sizeof wire::kRequestMagic) != 0) {
      die("not a plumb-shim request");
    }
    std::string verb, netns, args;
    for (size_t pos = sizeof wire::kRequestMagic; pos < static_cast<size_t>(n);) {
      const std::string kv(body.data() + pos);
      pos += kv.size() + 1;
      const size_t eq = kv.find('=');
      const std::string k = kv.substr(0, eq), v = eq == std::string::npos ? "" : kv.substr(eq + 1);
      if (k == "CNI_COMMAND")
        verb = v;
      else if (k == "CNI_NETNS")
        netns = v;
      else if (k == "CNI_ARGS")
        args = v;
    }
    Args a;
    set_verb_scenario(a, verb, cni_arg(args, "FLOOR_SCENARIO"));
    a.netns = netns;
    a.slot = static_cast<unsigned>(number("FLOOR_SLOT", cni_arg(args, "FLOOR_SLOT"), 0x10000));
    a.host_port = static_cast<uint16_t>(number("FLOOR_PORT", cni_arg(args, "FLOOR_PORT"), 0x10000));
    run(a, w);
  } catch (const std::exception& e) {
    if (nfds == 3) dprintf(fds[2], "plumb-floor serve: %s\n", e.what());
    code = 1;
  }
  wire::send_status(conn, wire::Status{wire::End::kExited, code});
  for (int i = 0; i < nfds; ++i) close(fds[i]);
}

/// `plumb-floor serve <socket> <bpffs dir>`: listens until killed, 8 threads in accept().
int serve(const std::string& path, const std::string& bpffs) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) die("socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int ls = ::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (ls < 0) die(std::string("socket(AF_UNIX): ") + std::strerror(errno));
  ::unlink(path.c_str());
  if (::bind(ls, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 || ::listen(ls, 128) != 0) {
    die("listen on " + path + ": " + std::strerror(errno));
  }
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([ls, &bpffs] {
      Warm w;
      w.bpffs = bpffs;
      for (;;) {
        const int conn = ::accept4(ls, nullptr, nullptr, SOCK_CLOEXEC);
        if (conn < 0) {
          if (errno == EINTR || errno == ECONNABORTED) continue;
          std::fprintf(stderr, "plumb-floor serve: accept: %s\n", std::strerror(errno));
          return;
        }
        serve_one(conn, w);
        close(conn);
      }
    });
  }
  for (auto& t : threads) t.join();
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 2 && std::strcmp(argv[1], "START") == 0) return 0;  // the bench's start-up phase: start and exit
    if (argc == 4 && std::strcmp(argv[1], "serve") == 0) return serve(argv[2], argv[3]);
    const Args a = parse_args(argc, argv);
    Warm w;
    w.bpffs = a.bpffs;
    run(a, w);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "plumb-floor: %s\n", e.what());
    return 1;
  }
}
