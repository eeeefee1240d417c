#!/usr/bin/python3
"""A fake kubelet for plumb's tests: kubelet's pod-resources API v1 (gRPC service
v1.PodResourcesLister: List, Get, GetAllocatableResources) on a unix socket, served by Debian's
python3-grpcio with the messages protoc generated from cni-entry/source/podresources/api.proto
(api_pb2.py in --proto-dir). It is not kubelet: it answers from a JSON file the test writes.

  --state FILE   read on every call:
      {"pods": [{"namespace": "default", "name": "pod-a",
                 "containers": [{"name": "c1",
                                 "devices": [{"resourceName": "intel.com/sriov", "deviceIds": ["0000:03:00.2"]}]}]}],
       "get": "serve" | "unimplemented" | "disabled" | "absent",
       "delaySeconds": 0}
    get: "serve" answers Get as kubelet 1.27+ with the KubeletPodResourcesGet gate on (a pod it does
    not know is an error, like kubelet's "pod ... not found"); "unimplemented" as a kubelet older
    than 1.27 (gRPC UNIMPLEMENTED); "disabled" as kubelet with the gate off (UNKNOWN, "PodResources
    API Get method disabled"); "absent" serves no Get method at all, leaving the answer to grpcio's
    own unknown-method handling (UNIMPLEMENTED, possibly followed by a stream reset before the
    request is read, as a gRPC server may do). delaySeconds: every call waits that long first.
    Every answer also carries CPU ids, memory, topology and a DRA entry, as a real kubelet may.
  --socket PATH  the unix socket (removed and created at start)
  --log FILE     every call is appended as "<method> <namespace>/<name>"
"""
import argparse
import json
import os
import signal
import sys
import time
from concurrent import futures

import grpc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--proto-dir", required=True)
    ap.add_argument("--socket", required=True)
    ap.add_argument("--state", required=True)
    ap.add_argument("--log", required=True)
    args = ap.parse_args()
    sys.path.insert(0, args.proto_dir)
    import api_pb2 as pb  # noqa: E402 (generated at build time)

    def state():
        with open(args.state) as f:
            return json.load(f)

    def log(line):
        with open(args.log, "a") as f:
            f.write(line + "\n")

    def fill(msg, pod):
        msg.name = pod["name"]
        msg.namespace = pod["namespace"]
        msg.cpu_ids.extend([2, 3])
        for c in pod.get("containers", []):
            cr = msg.containers.add()
            cr.name = c["name"]
            cr.cpu_ids.append(4)
            mem = cr.memory.add()
            mem.memory_type = "hugepages-1Gi"
            mem.size = 1 << 30
            mem.topology.nodes.add().ID = 0
            for d in c.get("devices", []):
                cd = cr.devices.add()
                cd.resource_name = d["resourceName"]
                cd.device_ids.extend(d["deviceIds"])
                cd.topology.nodes.add().ID = 1
            dra = cr.dynamic_resources.add()
            dra.claim_name = "claim"
            dra.claim_namespace = pod["namespace"]
            res = dra.claim_resources.add()
            res.cdi_devices.add().name = "vendor.example/gpu=gpu0"
            res.driver_name = "gpu.example"
            res.share_id = "s1"

    def delay(st):
        if st.get("delaySeconds"):
            time.sleep(float(st["delaySeconds"]))

    def get(req, ctx):
        log("Get %s/%s" % (req.pod_namespace, req.pod_name))
        st = state()
        delay(st)
        mode = st.get("get", "serve")
        if mode == "unimplemented":
            ctx.abort(grpc.StatusCode.UNIMPLEMENTED, "unknown method Get for service v1.PodResourcesLister")
        if mode == "disabled":
            ctx.abort(grpc.StatusCode.UNKNOWN, "PodResources API Get method disabled")
        for pod in st.get("pods", []):
            if pod["namespace"] == req.pod_namespace and pod["name"] == req.pod_name:
                resp = pb.GetPodResourcesResponse()
                fill(resp.pod_resources, pod)
                return resp
        ctx.abort(grpc.StatusCode.UNKNOWN, "pod %s in namespace %s not found" % (req.pod_name, req.pod_namespace))

    def list_(req, ctx):
        log("List")
        st = state()
        delay(st)
        resp = pb.ListPodResourcesResponse()
        for pod in st.get("pods", []):
            fill(resp.pod_resources.add(), pod)
        return resp

    def allocatable(req, ctx):
        log("GetAllocatableResources")
        return pb.AllocatableResourcesResponse()

    def handler(fn, req_type, resp_type):
        return grpc.unary_unary_rpc_method_handler(
            fn, request_deserializer=req_type.FromString, response_serializer=resp_type.SerializeToString)

    handlers = {
        "Get": handler(get, pb.GetPodResourcesRequest, pb.GetPodResourcesResponse),
        "List": handler(list_, pb.ListPodResourcesRequest, pb.ListPodResourcesResponse),
        "GetAllocatableResources": handler(allocatable, pb.AllocatableResourcesRequest, pb.AllocatableResourcesResponse),
    }

    class Service(grpc.GenericRpcHandler):
        def service(self, details):
            prefix = "/v1.PodResourcesLister/"
            if not details.method.startswith(prefix):
                return None
            method = details.method[len(prefix):]
            if method == "Get" and state().get("get") == "absent":
                log("Get (absent)")
                return None
            return handlers.get(method)

    service = Service()
    if os.path.exists(args.socket):
        os.unlink(args.socket)
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((service,))
    server.add_insecure_port("unix:" + args.socket)
    server.start()
    signal.signal(signal.SIGTERM, lambda *_: server.stop(0))
    server.wait_for_termination()


if __name__ == "__main__":
    main()
