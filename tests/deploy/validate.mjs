// Validates rendered manifests (the output of `kubectl kustomize deploy/<overlay>`), offline:
//   node validate.mjs <rendered.yaml> <overlay name> <repository root>
// 1. Every object against the Kubernetes API schema of its apiVersion and kind, as the
//    kubernetes-models package compiles them from the API's OpenAPI document (types, enums,
//    required fields, formats; unknown fields are not refused, as kubeconform without -strict).
//    A kind the package does not know fails: nothing goes unvalidated.
// 2. What an operator relies on and a schema cannot say: every container runs plumb's image
//    (deploy/image: name, the project's version as tag, IfNotPresent) from a path the image has
//    (deploy/Containerfile's COPY destinations); both DaemonSets' containers get NODE_NAME from
//    the downward API; requests and limits everywhere; the daemon's probes; no container removes
//    plumb's conflist on exit (a rollout keeps it); the NAD CRD's names are Multus's.
// Prints one line per object and each problem; exits 1 when there is any.
import { readFileSync } from "node:fs";
import { parse, parseAllDocuments } from "yaml";

const [rendered, overlay, root] = process.argv.slice(2);
if (!rendered || !overlay || !root) {
  console.error("usage: node validate.mjs <rendered.yaml> <overlay name> <repository root>");
  process.exit(2);
}
const problems = [];
const problem = (where, what) => problems.push(`${overlay}: ${where}: ${what}`);

/// The kubernetes-models module and export of an object: "apps/v1" -> kubernetes-models/apps/v1.
async function modelOf(doc) {
  const path = `kubernetes-models/${doc.apiVersion}`;
  try {
    const mod = await import(path);
    return mod[doc.kind];
  } catch {
    return undefined;
  }
}

/// The project's version from CMakeLists.txt's project(plumb VERSION x.y.z), or undefined.
function projectVersion() {
  const m = readFileSync(`${root}/CMakeLists.txt`, "utf8").match(/project\s*\(\s*plumb\b[^)]*\bVERSION\s+([0-9][0-9.]*)/);
  return m ? m[1] : undefined;
}

/// The image's files: the destinations of deploy/Containerfile's COPY lines.
function imagePaths() {
  const paths = new Set();
  for (const line of readFileSync(`${root}/deploy/Containerfile`, "utf8").split("\n")) {
    const m = line.match(/^COPY\s+(?:--\S+\s+)*\S+\s+(\S+)\s*$/);
    if (m) paths.add(m[1]);
  }
  return paths;
}

/// deploy/image's image (newName:newTag) and pull policy, as the component declares them.
async function declaredImage() {
  const k = parse(readFileSync(`${root}/deploy/image/kustomization.yaml`, "utf8"));
  const img = k.images.find((i) => i.name === "plumb");
  const literal = k.configMapGenerator.find((g) => g.name === "plumb-image").literals.find((l) => l.startsWith("imagePullPolicy="));
  return { image: `${img.newName}:${img.newTag}`, tag: img.newTag, pullPolicy: literal.split("=")[1] };
}

/// The pod spec of a workload, or undefined.
function podSpecOf(doc) {
  if (doc.kind === "DaemonSet" || doc.kind === "Deployment") return doc.spec?.template?.spec;
  if (doc.kind === "CronJob") return doc.spec?.jobTemplate?.spec?.template?.spec;
  if (doc.kind === "Job") return doc.spec?.template?.spec;
  return undefined;
}

function checkContainer(where, c, doc, want, paths) {
  if (c.image !== want.image) problem(where, `image ${c.image}, not deploy/image's ${want.image}`);
  if (c.imagePullPolicy !== want.pullPolicy) problem(where, `imagePullPolicy ${c.imagePullPolicy}, not ${want.pullPolicy}`);
  const cmd = c.command?.[0];
  if (!paths.has(cmd)) problem(where, `command ${cmd} is not a file deploy/Containerfile puts in the image`);
  for (const probe of ["livenessProbe", "readinessProbe"]) {
    const exec = c[probe]?.exec?.command?.[0];
    if (exec !== undefined && !paths.has(exec)) problem(where, `${probe} runs ${exec}, not a file of the image`);
  }
  for (const kind of ["requests", "limits"]) {
    for (const r of ["cpu", "memory"]) {
      if (c.resources?.[kind]?.[r] === undefined) problem(where, `no resources.${kind}.${r}`);
    }
  }
  const argv = [...(c.command ?? []), ...(c.args ?? [])];
  if (argv.some((a) => a.startsWith("--cleanup-config-on-exit"))) problem(where, "removes plumb's conflist on exit (a rollout would leave the node without it)");
  if (doc.kind === "DaemonSet") {
    const env = (c.env ?? []).find((e) => e.name === "NODE_NAME");
    if (env?.valueFrom?.fieldRef?.fieldPath !== "spec.nodeName") problem(where, "NODE_NAME is not spec.nodeName from the downward API");
  }
  if (c.name === "daemon" && !(c.livenessProbe && c.readinessProbe)) problem(where, "the daemon has no liveness and readiness probes");
}

function checkCrd(where, doc) {
  if (doc.metadata.name !== "network-attachment-definitions.k8s.cni.cncf.io") return;
  const names = doc.spec.names.shortNames ?? [];
  if (JSON.stringify(names) !== JSON.stringify(["nad", "net-attach-def"])) problem(where, `shortNames ${JSON.stringify(names)}, not Multus's ["nad","net-attach-def"]`);
}

const want = await declaredImage();
const version = projectVersion();
if (version !== undefined && want.tag !== version) problem("deploy/image", `tag ${want.tag} is not the project's version ${version}`);
const paths = imagePaths();
const docs = parseAllDocuments(readFileSync(rendered, "utf8"));
let count = 0;
for (const d of docs) {
  if (d.errors.length > 0) {
    problem(rendered, d.errors.map((e) => e.message).join("; "));
    continue;
  }
  const doc = d.toJS();
  if (doc === null) continue;
  const where = `${doc.kind}/${doc.metadata?.namespace ? doc.metadata.namespace + "/" : ""}${doc.metadata?.name}`;
  count++;
  const before = problems.length;
  const Model = await modelOf(doc);
  if (Model === undefined) {
    problem(where, `no Kubernetes schema for apiVersion ${doc.apiVersion} kind ${doc.kind}`);
    continue;
  }
  try {
    new Model(doc).validate();
  } catch (e) {
    problem(where, `schema: ${e.message}`);
  }
  if (doc.kind === "CustomResourceDefinition") checkCrd(where, doc);
  const spec = podSpecOf(doc);
  for (const c of [...(spec?.initContainers ?? []), ...(spec?.containers ?? [])]) checkContainer(`${where} container ${c.name}`, c, doc, want, paths);
  if (problems.length === before) console.log(`${overlay}: ${where} ok`);
}
if (count === 0) problem(rendered, "no objects");
for (const p of problems) console.error(p);
process.exit(problems.length === 0 ? 0 : 1);
