// engine/kernel/announce: the gratuitous ARP and unsolicited Neighbor Advertisement bytes against
// hand-checked golden arrays (RFC 5944 4.6, RFC 4861 4.4 and 7.2.6), and both sent on a real veth
// in private namespaces ([kernel]): the peer end's AF_PACKET listener is in
// tests/drivers/sriov_test.cpp (the VF path) and tests/drivers/macvlan_test.cpp.
#include "engine/kernel/announce.hpp"

#include <doctest/doctest.h>

#include "tests/support/golden.hpp"

using namespace plumb;
using plumb::test::Bytes;
using plumb::test::check_bytes;

TEST_CASE("announce: a gratuitous ARP request carries the address as sender and target, the MAC as sender, broadcast as target") {
  auto mac = *Mac::parse("02:aa:00:00:00:01");
  auto ip = *IpAddr::parse("198.51.100.7");
  check_bytes(announce::build_garp(mac, ip), Bytes{
                                                 0x00, 0x01,                          // hardware type Ethernet
                                                 0x08, 0x00,                          // protocol IPv4
                                                 6, 4,                                // address lengths
                                                 0x00, 0x01,                          // request
                                                 0x02, 0xaa, 0, 0, 0, 0x01,           // sender MAC
                                                 198, 51, 100, 7,                     // sender IP
                                                 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,  // target MAC: broadcast
                                                 198, 51, 100, 7,                     // target IP
                                             });
}

TEST_CASE("announce: an unsolicited NA has Override set, Solicited and Router clear, the target and a TLLA option") {
  auto mac = *Mac::parse("02:aa:00:00:00:01");
  auto ip = *IpAddr::parse("2001:db8:14::5");
  check_bytes(announce::build_unsolicited_na(mac, ip),
              Bytes{
                  136, 0,                    // type Neighbor Advertisement, code 0
                  0, 0,                      // checksum (the kernel's)
                  0x20, 0, 0, 0,             // flags: R=0 S=0 O=1
                  0x20, 0x01, 0x0d, 0xb8, 0, 0x14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x05,  // target
                  2, 1,                      // option Target Link-Layer Address, 8 bytes
                  0x02, 0xaa, 0, 0, 0, 0x01,  // the MAC
              });
}
