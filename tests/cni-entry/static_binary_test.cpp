// The binaries `plumb install` copies onto a node (plumb, plumb-shim) as built, run inside a
// root that is not this machine's: an empty root holding only the two binaries, and a Debian 11
// root (glibc 2.31, `debootstrap --variant=minbase bullseye`, made once by
// tests/support/debian_root.sh: ctest fixture debian11-root). /proc, /sys, /dev, /run/netns and
// the case's scratch directory are bound in. In each, plumb answers VERSION (directly and through
// the shim, which runs plumb beside it without a daemon), and runs an ADD and a DEL of its own
// bridge + host-local default network plus a NAD whose resourceName sends it to [fake kubelet]'s
// pod-resources gRPC socket, reading pod and NAD from the Kubernetes API test server over TLS
// with a token file. Everything happens in the case's private network and mount namespaces.
#include <doctest/doctest.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/support/fake_kubelet.hpp"
#include "tests/support/kube_cluster.hpp"

using plumb::test::KubeCluster;
using plumb::test::link_names;
using plumb::test::Node;
using plumb::test::Proc;

namespace {

namespace fs = std::filesystem;

/// A root directory mounted in the test's private mount namespace: a tmpfs (`base` empty) or an
/// overlay on `base` whose changes go to the node's scratch directory. Holds plumb and
/// plumb-shim in /opt/cni/bin and the binds above. Detached (with everything below it) on
/// destruction, before the Node removes its directory.
class ForeignRoot {
 public:
  ForeignRoot(const Node& node, const std::string& base) {
    char tmpl[] = "/tmp/plumb-root-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    if (base.empty()) {
      REQUIRE(::mount("tmpfs", dir_.c_str(), "tmpfs", 0, "mode=0755") == 0);
    } else {
      fs::create_directories(node.dir() + "/root-upper");
      fs::create_directories(node.dir() + "/root-work");
      std::string opts = "lowerdir=" + base + ",upperdir=" + node.dir() + "/root-upper,workdir=" + node.dir() + "/root-work";
      REQUIRE_MESSAGE(::mount("overlay", dir_.c_str(), "overlay", 0, opts.c_str()) == 0, opts, ": ", std::strerror(errno));
    }
    mounted_ = true;
    fs::create_directories(dir_ + "/opt/cni/bin");
    fs::copy_file(plumb::test::plumb_binary(), dir_ + "/opt/cni/bin/plumb");
    fs::copy_file(plumb::test::plumb_shim_binary(), dir_ + "/opt/cni/bin/plumb-shim");
    bind("/proc", MS_REC);
    bind("/sys", MS_REC);  // with the node's bpffs below it
    bind("/dev", MS_REC);
    bind("/run/netns", MS_REC);  // each pod namespace is a mount of its own
    bind(node.dir(), 0);         // kubeconfig, token, TLS files, sockets, state: the same paths inside
  }
  ~ForeignRoot() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
    ::rmdir(dir_.c_str());
  }
  ForeignRoot(const ForeignRoot&) = delete;
  ForeignRoot& operator=(const ForeignRoot&) = delete;

  /// A script running `binary` (a file of /opt/cni/bin) chrooted into the root, for
  /// KubeCluster::run's `binary`.
  std::string runner(const Node& node, const std::string& binary) const {
    std::string path = node.dir() + "/in-root-" + binary;
    plumb::test::write_file(path, "#!/bin/sh\nexec chroot " + dir_ + " /opt/cni/bin/" + binary + "\n");
    fs::permissions(path, fs::perms::owner_all);
    return path;
  }

 private:
  void bind(const std::string& from, unsigned long flags) const {
    fs::create_directories(dir_ + from);
    REQUIRE_MESSAGE(::mount(from.c_str(), (dir_ + from).c_str(), nullptr, MS_BIND | flags, nullptr) == 0, from);
  }

  std::string dir_;
  bool mounted_ = false;
};

/// VERSION, ADD and DEL as described at the top, in `base` ("" = an empty root).
void run_in_root(const std::string& base) {
  Node node;
  KubeCluster c(node);
  plumb::test::FakeKubelet kubelet(node.dir() + "/kubelet",
                                   R"({"pods":[)" + plumb::test::FakeKubelet::pod("default", "web", {{"example.com/blue", {"dev-1"}}}) + "]}");
  c.api.put("network-attachment-definitions", "default", "blue",
            R"({"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition", "metadata": {"name": "blue",
                "namespace": "default", "uid": "nad-blue", "resourceVersion": "10",
                "annotations": {"k8s.v1.cni.cncf.io/resourceName": "example.com/blue"}},
                "spec": {"config": )" +
                plumb::test::json_quote(plumb::test::bridge_net("br-blue", "198.51.100.0/24", c.fx.ipam_dir())) + "}}");
  c.add_pod("default", "web", "uid-1", {{"k8s.v1.cni.cncf.io/networks", "blue"}});
  std::string ns = node.add_netns("web");  // before the root: binds copy the mounts there are
  ForeignRoot root(node, base);
  const std::string plumb = root.runner(node, "plumb");
  const std::string shim = root.runner(node, "plumb-shim");

  for (const std::string& binary : {plumb, shim}) {
    Proc v = plumb::test::run({binary}, {{"CNI_COMMAND", "VERSION"}}, "");
    INFO(binary, ": ", v.out, v.err);
    CHECK(v.exit_code == 0);
    CHECK(v.out.find(R"("supportedVersions")") != std::string::npos);
  }

  const std::string conf = c.config(R"("podResourcesSocket": ")" + kubelet.socket() + R"(", "deviceInfoDir": ")" +
                                    node.dir() + R"(/devinfo")");
  Proc add = c.run("ADD", "ctr-1", ns, "default", "web", "uid-1", conf, {}, plumb);
  INFO("ADD: ", add.out, add.err);
  REQUIRE(add.exit_code == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo", "eth0", "net1"});
  CHECK(plumb::test::ipv4_of("web", "eth0").rfind("203.0.113.", 0) == 0);
  CHECK(plumb::test::ipv4_of("web", "net1") == "198.51.100.2/24");
  CHECK(c.api.count("GET", "/api/v1/namespaces/default/pods/web", "200") == 1);
  CHECK(c.api.count("PATCH", "/api/v1/namespaces/default/pods/web/status", "200") == 1);
  CHECK(kubelet.calls() == std::vector<std::string>{"Get default/web"});

  Proc del = c.run("DEL", "ctr-1", ns, "default", "web", "uid-1", conf, {}, plumb);
  INFO("DEL: ", del.out, del.err);
  CHECK(del.exit_code == 0);
  CHECK(link_names("web") == std::set<std::string>{"lo"});
  CHECK(plumb::test::address_files(c.fx.ipam_dir()).empty());
  CHECK(c.records().empty());
}

}  // namespace

TEST_CASE("in an empty root holding only plumb and plumb-shim: VERSION, and ADD and DEL with the API server and kubelet") {
  run_in_root("");
}

TEST_CASE("in a Debian 11 root (glibc 2.31): VERSION, and ADD and DEL with the API server and kubelet") {
  const char* base = PLUMB_DEBIAN11_ROOT;
  REQUIRE_MESSAGE(fs::exists(std::string(base) + "/etc/debian_version"),
                  base, " is missing: ctest's fixture debian11-root makes it (tests/support/debian_root.sh)");
  CHECK(plumb::test::read_file(std::string(base) + "/etc/debian_version").rfind("11.", 0) == 0);
  run_in_root(base);
}
