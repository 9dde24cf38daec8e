// Which languages trellis can check: the server's sensors as the extension
// knows them (engine/src/sensor/). The document selector and the activation
// events in package.json are derived from this list (a unit test keeps
// package.json in step), so the extension wakes up only where a sensor exists.

export interface Sensor {
  /** VS Code language id. */
  language: string;
  /** What the sensor runs. */
  checks: string;
  /** A file whose presence in the workspace means the sensor applies. */
  marker: string;
}

export const SENSORS: readonly Sensor[] = [
  { language: "rust", checks: "cargo check, cargo test", marker: "Cargo.toml" },
  { language: "python", checks: "ty check (or pyright), pytest, ruff check", marker: "pyproject.toml" },
  { language: "typescript", checks: "tsc --noEmit, the package.json test script", marker: "tsconfig.json" },
];

/** The activation events for the sensors: their languages and workspace markers. */
export function activationEvents(sensors: readonly Sensor[] = SENSORS): string[] {
  return [
    ...sensors.map((sensor) => `workspaceContains:**/${sensor.marker}`),
    ...sensors.map((sensor) => `onLanguage:${sensor.language}`),
  ];
}

/** The language client's document selector: files of the sensors' languages. */
export function documentSelector(sensors: readonly Sensor[] = SENSORS): { scheme: string; language: string }[] {
  return sensors.map((sensor) => ({ scheme: "file", language: sensor.language }));
}
