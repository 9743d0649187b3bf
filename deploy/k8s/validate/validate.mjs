// Validates Kubernetes manifests (a multi-document YAML stream on stdin,
// e.g. `kubectl kustomize deploy/k8s`) against the Kubernetes schemas of
// kubernetes-models, offline. Prints one line per object; exits 1 on the
// first invalid or unknown one, naming it.
import { parseAllDocuments } from "yaml";

const chunks = [];
for await (const c of process.stdin) chunks.push(c);
const docs = parseAllDocuments(Buffer.concat(chunks).toString("utf8"));
let count = 0;
for (const doc of docs) {
  if (doc.errors.length) {
    console.error(`YAML error: ${doc.errors[0].message}`);
    process.exit(1);
  }
  const obj = doc.toJS();
  if (obj == null) continue;
  const name = `${obj.kind}/${obj.metadata?.name ?? "?"} (${obj.apiVersion})`;
  let mod;
  try {
    mod = await import(`kubernetes-models/${obj.apiVersion}`);
  } catch {
    console.error(`${name}: unknown apiVersion`);
    process.exit(1);
  }
  const Model = mod[obj.kind];
  if (!Model) {
    console.error(`${name}: unknown kind`);
    process.exit(1);
  }
  try {
    new Model(obj).validate();
  } catch (e) {
    console.error(`${name}: ${e.message}`);
    process.exit(1);
  }
  console.log(`valid: ${name}`);
  count++;
}
if (count === 0) {
  console.error("no objects to validate");
  process.exit(1);
}
