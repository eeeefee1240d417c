// A virtio-net device in userspace (VDUSE, Documentation/userspace-api/vduse.rst) for the vdpa
// driver's full-kernel cases: it creates VDUSE device <name> (MAC <mac>, one RX and one TX queue,
// no control queue: VDUSE refuses one) and answers the kernel's control messages (status, queue
// state, IOTLB updates) until SIGTERM, then destroys the device. No data path: queues are never
// processed, which the control plane plumb drives does not notice.
//
//   vduse-net <name> <mac aa:bb:cc:dd:ee:ff>
//
// Prints "ready" on stdout once /dev/vduse/<name> serves messages: then `vdpa dev add name <vdpa
// name> mgmtdev vduse` (from the initial network namespace: the vdpa netlink family is not
// network-namespace aware) puts it on the vdpa bus. On SIGTERM it waits (bounded) for that vdpa
// device to be deleted, since VDUSE_DESTROY_DEV is refused (EBUSY) while it is on the bus.
// Exit status: 0 after destroying the device; 1 when the device cannot be made or destroyed.
#include <errno.h>
#include <fcntl.h>
#include <linux/vduse.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ids.h>
#include <linux/virtio_net.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

static int fail(const char* what) {
  fprintf(stderr, "vduse-net: %s: %s\n", what, strerror(errno));
  return 1;
}

/// Answers one control message: every request succeeds; a queue's state is "nothing consumed".
static int serve_one(int dev) {
  struct vduse_dev_request req;
  ssize_t n = read(dev, &req, sizeof(req));
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
  if (n != (ssize_t)sizeof(req)) return fail("read a control message");
  struct vduse_dev_response resp;
  memset(&resp, 0, sizeof(resp));
  resp.request_id = req.request_id;
  resp.result = VDUSE_REQ_RESULT_OK;
  if (req.type == VDUSE_GET_VQ_STATE) {
    resp.vq_state.index = req.vq_state.index;
    resp.vq_state.split.avail_index = 0;
  }
  if (write(dev, &resp, sizeof(resp)) != (ssize_t)sizeof(resp)) return fail("answer a control message");
  return 0;
}

static int create(int control, const char* name, const unsigned char mac[6]) {
  struct virtio_net_config net;
  memset(&net, 0, sizeof(net));
  memcpy(net.mac, mac, 6);
  struct vduse_dev_config* c = calloc(1, sizeof(*c) + sizeof(net));  // config[] holds net
  if (c == NULL) return fail("calloc");
  snprintf(c->name, sizeof(c->name), "%s", name);
  c->device_id = VIRTIO_ID_NET;
  c->features = (1ULL << VIRTIO_F_VERSION_1) | (1ULL << VIRTIO_F_ACCESS_PLATFORM) | (1ULL << VIRTIO_NET_F_MAC);
  c->vq_num = 2;
  c->vq_align = 4096;
  c->config_size = sizeof(net);
  memcpy(c->config, &net, sizeof(net));
  uint64_t api = 0;
  int rc = 0;
  if (ioctl(control, VDUSE_SET_API_VERSION, &api) != 0) {
    rc = fail("VDUSE_SET_API_VERSION 0");
  } else if (ioctl(control, VDUSE_CREATE_DEV, c) != 0) {
    rc = fail("VDUSE_CREATE_DEV");
  }
  free(c);
  return rc;
}

int main(int argc, char** argv) {
  unsigned char mac[6];
  if (argc != 3 ||
      sscanf(argv[2], "%hhx:%hhx:%hhx:%hhx:%hhx:%hhx", &mac[0], &mac[1], &mac[2], &mac[3], &mac[4], &mac[5]) != 6) {
    fprintf(stderr, "usage: vduse-net <name> <mac>\n");
    return 2;
  }
  const char* name = argv[1];
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigaddset(&term, SIGINT);
  sigprocmask(SIG_BLOCK, &term, NULL);
  int sig = signalfd(-1, &term, SFD_CLOEXEC);
  int control = open("/dev/vduse/control", O_RDWR | O_CLOEXEC);
  if (sig < 0 || control < 0) return fail("open /dev/vduse/control (is the vduse module loaded?)");
  if (create(control, name, mac) != 0) return 1;
  char path[300];
  snprintf(path, sizeof(path), "/dev/vduse/%s", name);
  int dev = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK);
  if (dev < 0) return fail(path);
  for (uint32_t i = 0; i < 2; ++i) {
    struct vduse_vq_config vq;
    memset(&vq, 0, sizeof(vq));
    vq.index = i;
    vq.max_size = 256;
    if (ioctl(dev, VDUSE_VQ_SETUP, &vq) != 0) return fail("VDUSE_VQ_SETUP");
  }
  printf("ready\n");
  fflush(stdout);
  for (;;) {
    struct pollfd p[2] = {{dev, POLLIN, 0}, {sig, POLLIN, 0}};
    if (poll(p, 2, -1) < 0 && errno != EINTR) return fail("poll");
    if (p[1].revents & POLLIN) break;
    if ((p[0].revents & POLLIN) && serve_one(dev) != 0) return 1;
  }
  close(dev);
  // Up to 10 s for the test to delete the vdpa device (VDUSE_DESTROY_DEV answers EBUSY meanwhile).
  char dname[VDUSE_NAME_MAX] = {0};
  snprintf(dname, sizeof(dname), "%s", name);
  for (int i = 0; i < 200; ++i) {
    if (ioctl(control, VDUSE_DESTROY_DEV, dname) == 0) return 0;
    if (errno != EBUSY) break;
    usleep(50 * 1000);
  }
  return fail("VDUSE_DESTROY_DEV");
}
