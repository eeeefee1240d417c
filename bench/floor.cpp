// plumb-floor: the kernel floor of one pod's attachments, for the latency bench (bench/, plumb-bench).
// It does only the kernel operations the bench's scenarios need, with no config parsing, no
// state, no IPAM files, no journal: names, addresses and ports come from argv, objects plumb
// set up once per node (bridges with their gateway address, table `inet plumb` with its maps and
// chains, the pinned bandwidth programs) are taken as given. What is left is the cost the kernel
// charges for the attachment plus one process start, which is what plumb is measured against.
//
//   plumb-floor ADD|DEL|DEL-NAIVE <a|b|c> <pod netns path> <slot> <host port> <bpffs dir>
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
// netinet/in.h before the linux/ headers: glibc then keeps linux/in.h from redefining it.
#include <netinet/in.h>

#include <fcntl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>

#include "ebpf/loader.hpp"
#include "engine/kernel/tc.hpp"
#include "engine/kernel/addr.hpp"
#include "engine/kernel/link.hpp"
#include "engine/netlink/socket.hpp"
#include "engine/nft/nfnl.hpp"
#include "engine/nft/nft.hpp"
#include "engine/nft/objects.hpp"
#include "engine/nft/portmap.hpp"
#include "engine/nft/portmap_objects.hpp"
#include "engine/kernel/route.hpp"

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

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "plumb-floor: %s\n", what.c_str());
  std::exit(1);
}

template <class T>
T must(Result<T> r, const char* what) {
  if (!r) die(std::string(what) + ": " + r.error().text());
  return std::move(*r);
}
void must(const Status& st, const char* what) {
  if (!st) die(std::string(what) + ": " + st.error().text());
}

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
void nft_elements(const Args& a, const IpAddr& pod) {
  auto session = must(nft::nfnl::Session::open(), "open nfnetlink");
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

void bandwidth_add(netlink::Socket& node, const Args& a, int host_index) {
  auto progs = must(ebpf::Programs::open_existing(a.bpffs), "open pinned bandwidth programs");
  if (!progs) die("no bandwidth programs pinned under " + a.bpffs + " (plumb loads them on its first ADD)");
  const ebpf::Limit limit{100'000'000, 1'000'000};
  must(plumb::tc::add_clsact(node, host_index), "add clsact");
  for (ebpf::Hook h : {ebpf::Hook::HostIngress, ebpf::Hook::HostEgress}) {
    must(progs->configure(host_index, h, limit, kOwnerBase + a.slot), "configure bandwidth state");
    must(plumb::tc::attach(node, host_index, ebpf::clsact_hook(h), progs->prog_fd(h), progs->prog_name(h)), "attach bandwidth filter");
  }
  // EDT mode (the kernel has sch_fq): the pod's ingress limit also needs fq as root qdisc.
  if (progs->mode() == ebpf::Mode::EdtFq) must(plumb::tc::set_root_fq(node, host_index), "set fq root qdisc");
}

void bandwidth_del(const Args& a, int host_index) {
  auto progs = must(ebpf::Programs::open_existing(a.bpffs), "open pinned bandwidth programs");
  if (!progs) die("no bandwidth programs pinned under " + a.bpffs);
  for (ebpf::Hook h : {ebpf::Hook::HostIngress, ebpf::Hook::HostEgress}) {
    must(progs->remove(host_index, h, kOwnerBase + a.slot), "remove bandwidth state");
  }
}

Args parse_args(int argc, char** argv) {
  if (argc != 7) die("usage: plumb-floor ADD|DEL|DEL-NAIVE a|b|c <pod netns> <slot> <host port> <bpffs dir>");
  Args a;
  std::string verb = argv[1];
  if (verb != "ADD" && verb != "DEL" && verb != "DEL-NAIVE") die("verb must be ADD, DEL or DEL-NAIVE, not " + verb);
  a.add = verb == "ADD";
  a.batched_del = verb == "DEL";
  std::string s = argv[2];
  if (s != "a" && s != "b" && s != "c") die("scenario must be a, b or c, not " + s);
  a.scenario = s[0];
  a.netns = argv[3];
  a.slot = static_cast<unsigned>(std::strtoul(argv[4], nullptr, 10));
  a.host_port = static_cast<uint16_t>(std::strtoul(argv[5], nullptr, 10));
  a.bpffs = argv[6];
  if (a.slot >= 0x10000) die("slot must be below 65536");
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  const Args a = parse_args(argc, argv);
  const int nsfd = open(a.netns.c_str(), O_RDONLY | O_CLOEXEC);
  if (nsfd < 0) die("open " + a.netns + ": " + std::strerror(errno));
  auto node = must(netlink::Socket::open(), "open rtnetlink socket");
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
    nft_elements(a, ip0);
    if (secondaries) {
      create_veth(node, host1, index_of(node, "br1"), "net1", nsfd);
      configure_veth_peer(pod, "net1", pod_addr(2, a.slot));
      create_macvlan(node, index_of(node, "mst0"), "net2", nsfd);
      must(plumb::addr::add(pod, index_of(pod, "net2"), IpPrefix{pod_addr(3, a.slot), 64}, /*nodad=*/true), "add address");
    }
    if (a.scenario == 'c') bandwidth_add(node, a, host0_index);
  } else {
    if (a.scenario == 'c') bandwidth_del(a, index_of(node, host0));
    nft_elements(a, ip0);
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
  close(nsfd);
  return 0;
}
