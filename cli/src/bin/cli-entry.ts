// The bundled CLI's entry (dist/bin/switchyard.cjs, loaded by switchyard-bin.ts).
import { runAsProgram } from "../main.js";

void runAsProgram();
