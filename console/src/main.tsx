import { render } from "preact";
import { adoptFragmentToken } from "./api";
import { App } from "./app";
import "./style.css";

adoptFragmentToken();
const root = document.getElementById("app");
if (root) render(<App />, root);
