// main() of every test executable. As root (how scripts/test runs), the whole process first
// leaves the machine's namespaces for a private network + mount namespace, so no test can touch
// the host; cases that need a node build a fresh one (Node). Unit cases need no privileges.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>
#include <unistd.h>

#include "tests/support/private_node.hpp"

int main(int argc, char** argv) {
  if (::geteuid() == 0) plumb::test::enter_private_root();
  doctest::Context ctx(argc, argv);
  return ctx.run();
}
