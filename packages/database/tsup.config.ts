import { defineConfig } from "tsup"

export default defineConfig({
  entry: ["src/*.ts"],
  format: ["esm"],
  dts: { compilerOptions: { composite: false } },
  tsconfig: "tsconfig.build.json",
  sourcemap: true,
  clean: true,
  splitting: true,
  target: "node20"
})
