-- Which languages trellis can check, and with what: the server's sensors as
-- the plugin knows them (engine/src/sensor/). The filetypes to attach to and
-- :checkhealth read this; a language without a sensor gets no server.

return {
  rust = {
    sensor = "cargo (cargo check, cargo test)",
    tool = "cargo",
    markers = { "Cargo.toml" },
  },
  python = {
    sensor = "ty (or pyright), pytest, ruff",
    tool = "ty",
    markers = { "pyproject.toml" },
  },
  typescript = {
    sensor = "tsc (tsc --noEmit, the package.json test script or node --test)",
    tool = "tsc",
    markers = { "tsconfig.json", "package.json" },
  },
}
