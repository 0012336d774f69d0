//! What the demo model learns from a file it read, and how a teammate reports it by its
//! role: the researcher says what the file is, the reviewer judges it, the writer says
//! what it wrote. A report's first line carries the finding, so a leader that keeps one
//! line of each report still answers with facts.

use super::truncate;

/// A team member's role, as the demo leader's brief names it (`… as researcher: …`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TeamRole {
    /// Finds out what the workspace is about.
    Researcher,
    /// Judges what the workspace has and lacks.
    Reviewer,
    /// Writes the summary.
    Writer,
}

impl TeamRole {
    /// The role the task gives (`… as reviewer: …`), else the agent's instructions
    /// (`You are a code reviewer.`), if any.
    pub(super) fn of(task: &str, instructions: Option<&str>) -> Option<TeamRole> {
        let named = |text: &str, after: &str| {
            let lower = text.to_ascii_lowercase();
            let (_, rest) = lower.split_once(after)?;
            // `as reviewer`, `you are a code reviewer`: the role is the first or second word.
            let words: Vec<String> = rest
                .split(|c: char| !c.is_ascii_alphabetic())
                .filter(|w| !w.is_empty())
                .take(2)
                .map(str::to_owned)
                .collect();
            words.iter().find_map(|word| match word.as_str() {
                "researcher" => Some(TeamRole::Researcher),
                "reviewer" => Some(TeamRole::Reviewer),
                "writer" => Some(TeamRole::Writer),
                _ => None,
            })
        };
        named(task, "(your part, as ").or_else(|| instructions.and_then(|text| named(text, "you are a")))
    }
}

/// What a file says, as far as a script can tell.
#[derive(Debug, Default, PartialEq)]
pub(super) struct Findings {
    /// The first heading, else the first line.
    pub(super) title: String,
    /// The first sentence of the first paragraph of prose.
    pub(super) sentence: Option<String>,
    /// The file's lines.
    pub(super) lines: usize,
    /// Its second-level headings, in order.
    pub(super) sections: Vec<String>,
    /// Fenced code blocks.
    pub(super) code_blocks: usize,
    /// Lines with `TODO` or `FIXME`.
    pub(super) todos: usize,
    /// Whether it mentions a licence.
    pub(super) license: bool,
}

impl Findings {
    /// The findings in `fs.read` output (`     1\ttext` lines).
    pub(super) fn of_read(content: &str) -> Findings {
        let text: Vec<&str> = content
            .lines()
            .filter_map(|line| line.split_once('\t').filter(|(n, _)| n.trim().parse::<u64>().is_ok()).map(|(_, t)| t))
            .collect();
        let mut findings = Findings { lines: text.len(), ..Findings::default() };
        let mut in_code = false;
        let mut paragraph = String::new();
        for line in &text {
            let trimmed = line.trim();
            if trimmed.starts_with("```") {
                in_code = !in_code;
                findings.code_blocks += usize::from(in_code);
                continue;
            }
            if in_code {
                continue;
            }
            findings.todos += usize::from(trimmed.contains("TODO") || trimmed.contains("FIXME"));
            findings.license |= trimmed.to_ascii_lowercase().contains("license");
            if let Some(heading) = trimmed.strip_prefix("## ") {
                findings.sections.push(heading.trim().to_owned());
            } else if let Some(heading) = trimmed.strip_prefix("# ") {
                if findings.title.is_empty() {
                    findings.title = heading.trim().to_owned();
                }
            } else if findings.sentence.is_none() && is_prose(trimmed) {
                paragraph.push_str(trimmed);
                paragraph.push(' ');
                if let Some(end) = sentence_end(&paragraph) {
                    findings.sentence = Some(truncate(paragraph[..end].trim(), 240));
                }
            } else if trimmed.is_empty() && findings.sentence.is_none() && !paragraph.is_empty() {
                findings.sentence = Some(truncate(paragraph.trim(), 240));
            }
        }
        if findings.title.is_empty() {
            findings.title =
                text.iter().map(|l| l.trim()).find(|l| !l.is_empty()).map(|l| truncate(l, 80)).unwrap_or_default();
        }
        findings
    }

    /// The first few section names, joined.
    fn section_names(&self) -> String {
        let mut names: Vec<String> = self.sections.iter().take(4).cloned().collect();
        if self.sections.len() > 4 {
            names.push(format!("and {} more", self.sections.len() - 4));
        }
        names.join(", ")
    }

    /// The one line a teammate of `role` reports about `path`; the writer's names what it
    /// wrote (`wrote`: the summary's path and size, when it did).
    pub(super) fn report(&self, role: TeamRole, path: &str, wrote: Option<(&str, usize)>) -> String {
        match role {
            TeamRole::Researcher => {
                let what = self.sentence.as_deref().map(|s| format!(": {s}")).unwrap_or_default();
                let sections = match self.sections.is_empty() {
                    true => String::new(),
                    false => format!("; its sections include {}", self.section_names()),
                };
                format!("`{path}` is “{}”{what} ({} lines{sections}).", self.title, self.lines)
            }
            TeamRole::Reviewer => {
                let todos = match self.todos {
                    0 => "no TODO left".to_owned(),
                    n => format!("{n} TODO or FIXME lines to settle"),
                };
                let license = if self.license { "it names a license" } else { "it names no license" };
                format!(
                    "`{path}` (“{}”) reads well enough: {} sections, {} code examples, {todos}; {license}.",
                    self.title,
                    self.sections.len(),
                    self.code_blocks
                )
            }
            TeamRole::Writer => match wrote {
                Some((summary, bytes)) => {
                    format!("I wrote `{summary}` ({bytes} bytes), a summary of “{}” from `{path}`.", self.title)
                }
                None => format!("I did not write the summary of “{}” (`{path}`).", self.title),
            },
        }
    }
}

/// Whether a line is prose (not a badge, a table, a list, an HTML tag or a quote).
fn is_prose(line: &str) -> bool {
    !line.is_empty() && !line.starts_with(['[', '!', '|', '<', '>', '-', '*', '#'])
}

/// Where the first sentence of `text` ends (after its full stop).
fn sentence_end(text: &str) -> Option<usize> {
    text.match_indices(". ").next().map(|(at, _)| at + 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> String {
        text.lines().enumerate().map(|(n, line)| format!("{:>6}\t{line}\n", n + 1)).collect()
    }

    #[test]
    fn a_readme_gives_its_title_first_sentence_and_sections() {
        let findings = Findings::of_read(&read(
            "# Gadget\n\n[![ci](x)](y)\n\nGadget turns widgets into\ngizmos. It is fast.\n\n## Install\n\n```sh\nmake\n```\n\n## Usage\nTODO: write\n\nMIT license.\n",
        ));
        assert_eq!(findings.title, "Gadget");
        assert_eq!(findings.sentence.as_deref(), Some("Gadget turns widgets into gizmos."));
        assert_eq!(findings.sections, ["Install", "Usage"]);
        assert_eq!((findings.code_blocks, findings.todos, findings.license), (1, 1, true));
        let report = findings.report(TeamRole::Researcher, "README.md", None);
        assert!(report.starts_with("`README.md` is “Gadget”: Gadget turns widgets into gizmos."), "{report}");
        assert!(report.contains("Install, Usage"), "{report}");
        let review = findings.report(TeamRole::Reviewer, "README.md", None);
        assert!(review.contains("2 sections, 1 code examples, 1 TODO or FIXME lines"), "{review}");
    }

    #[test]
    fn roles_come_from_the_brief() {
        assert_eq!(TeamRole::of("Describe it (your part, as reviewer: do what …)", None), Some(TeamRole::Reviewer));
        assert_eq!(TeamRole::of("Describe it", None), None);
        assert_eq!(TeamRole::of("Work as a team", None), None);
        assert_eq!(TeamRole::of("Describe it", Some("You are a technical writer. Read…")), Some(TeamRole::Writer));
        assert_eq!(TeamRole::of("Describe it", Some("You are a helpful assistant.")), None);
    }
}
