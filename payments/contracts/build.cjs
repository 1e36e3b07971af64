// Rebuilds TestToken.json from TestToken.sol with solc-js: `npm run build:contracts`.
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const source = fs.readFileSync(path.join(__dirname, "TestToken.sol"), "utf8");
const input = {
  language: "Solidity",
  sources: { "TestToken.sol": { content: source } },
  settings: { optimizer: { enabled: true, runs: 200 }, evmVersion: "paris",
              outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } } },
};
const output = JSON.parse(solc.compile(JSON.stringify(input)));
const errors = (output.errors || []).filter((e) => e.severity === "error");
if (errors.length) {
  console.error(errors.map((e) => e.formattedMessage).join("\n"));
  process.exit(1);
}
const contract = output.contracts["TestToken.sol"].TestToken;
const artifact = { compiler: `solc-js ${solc.version()}`, abi: contract.abi, bytecode: "0x" + contract.evm.bytecode.object };
fs.writeFileSync(path.join(__dirname, "TestToken.json"), JSON.stringify(artifact, null, 2) + "\n");
console.log(`TestToken.json written (${artifact.compiler})`);
