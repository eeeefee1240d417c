// The API clients a process keeps across invocations (see client.hpp: keep_clients, client_for).
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "engine/k8s/client.hpp"

namespace plumb::k8s {
namespace {

/// Clients kept at most: the pod source's and a cluster IPAM's own kubeconfig, with room for a
/// change of options; the least recently used one goes first.
constexpr size_t kMaxKept = 4;

struct Kept {
  Credentials creds;  // as asked (the client's own may change: an exec plugin's certificate)
  Options opts;
  std::shared_ptr<Client> client;
};

struct Keeper {
  bool on = false;
  pid_t owner = 0;            // the process that made `clients`
  std::vector<Kept> clients;  // most recently used last
};

/// Never destroyed: a child forked with it that exits must not close its parent's connections.
Keeper& keeper() {
  static auto* k = new Keeper;
  return *k;
}

/// Sets aside clients inherited through a fork (or all of them, `all`): their connections are
/// the parent's. They are never used, and never destroyed (that would close the parent's TLS
/// sessions).
void set_aside(Keeper& k, bool all) {
  static auto* aside = new std::vector<std::shared_ptr<Client>>;  // never destroyed, as keeper()
  if (!all && k.owner == ::getpid()) return;
  for (auto& kept : k.clients) {
    if (k.owner != ::getpid()) aside->push_back(std::move(kept.client));
  }
  k.clients.clear();
  k.owner = ::getpid();
}

}  // namespace

void keep_clients(bool on) {
  Keeper& k = keeper();
  k.on = on;
  if (!on) set_aside(k, true);
}

std::shared_ptr<Client> client_for(Credentials creds, Options opts) {
  Keeper& k = keeper();
  if (!k.on) return std::make_shared<Client>(std::move(creds), opts);
  set_aside(k, false);
  auto same = std::find_if(k.clients.begin(), k.clients.end(),
                           [&](const Kept& c) { return c.opts == opts && c.creds == creds; });
  if (same != k.clients.end()) {
    std::rotate(same, same + 1, k.clients.end());  // now the most recently used
    return k.clients.back().client;
  }
  if (k.clients.size() >= kMaxKept) k.clients.erase(k.clients.begin());
  auto client = std::make_shared<Client>(creds, opts);
  k.clients.push_back(Kept{std::move(creds), opts, client});
  return client;
}

}  // namespace plumb::k8s
