// Rebuilds each contract's artifact (<Contract>.json, next to its source) with solc-js: `npm run build:contracts`.
// Arguments: the .sol files to build; none builds the shop's TestToken.
const fs = require("fs");
const path = require("path");
const solc = require("solc");

const files = process.argv.slice(2).length ? process.argv.slice(2) : [path.join(__dirname, "TestToken.sol")];
for (const file of files) {
  const name = path.basename(file);
  const input = {
    language: "Solidity",
    sources: { [name]: { content: fs.readFileSync(file, "utf8") } },
    settings: { optimizer: { enabled: true, runs: 200 }, evmVersion: "paris",
                outputSelection: { "*": { "*": ["abi", "evm.bytecode.object"] } } },
  };
  const output = JSON.parse(solc.compile(JSON.stringify(input)));
  const errors = (output.errors || []).filter((e) => e.severity === "error");
  if (errors.length) {
    console.error(errors.map((e) => e.formattedMessage).join("\n"));
    process.exit(1);
  }
  for (const [contractName, contract] of Object.entries(output.contracts[name])) {
    const artifact = { compiler: `solc-js ${solc.version()}`, abi: contract.abi, bytecode: "0x" + contract.evm.bytecode.object };
    fs.writeFileSync(path.join(path.dirname(file), `${contractName}.json`), JSON.stringify(artifact, null, 2) + "\n");
    console.log(`${contractName}.json written (${artifact.compiler})`);
  }
}
