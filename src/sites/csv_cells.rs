//! The cells of a site list kept as a spreadsheet's CSV (RFC 4180), with what a general CSV
//! reader loses and the catalogue needs: whether a cell was quoted, and the line each record
//! starts on as an editor counts lines whatever the line ends (`\n`, `\r\n`, `\r`).
//!
//! A quoted cell is the spreadsheet saying "exactly this text": its spaces are kept. An unquoted
//! cell is trimmed (hand-edited lists put a space after the comma). Blank lines are skipped.
//! Pure: text in, records out.

/// One cell: its text (unquoted and unescaped) and whether it was quoted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    pub text: String,
    pub quoted: bool,
}

/// One record and the line (from 1) it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub line: usize,
    pub cells: Vec<Cell>,
}

/// Every record of `text`. `Err((line, message))` for a quote that is never closed or text
/// after a closing quote.
pub fn records(text: &str) -> std::result::Result<Vec<Record>, (usize, String)> {
    let c: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line) = (0, 1);
    // A line end at c[i]: how many chars it takes (0 when c[i] is not one).
    let eol = |i: usize| match c.get(i) {
        Some('\r') if c.get(i + 1) == Some(&'\n') => 2,
        Some('\r') | Some('\n') => 1,
        _ => 0,
    };
    let blank = |c: char| c == ' ' || c == '\t';
    while i < c.len() {
        // A blank line is no record.
        let mut j = i;
        while j < c.len() && blank(c[j]) {
            j += 1;
        }
        if j == c.len() {
            break;
        }
        if eol(j) > 0 {
            i = j + eol(j);
            line += 1;
            continue;
        }
        let start = line;
        let mut cells = Vec::new();
        loop {
            while i < c.len() && blank(c[i]) {
                i += 1;
            }
            if c.get(i) == Some(&'"') {
                let opened = line;
                i += 1;
                let mut s = String::new();
                loop {
                    match c.get(i) {
                        None => return Err((opened, "a quoted cell is never closed".into())),
                        Some('"') if c.get(i + 1) == Some(&'"') => {
                            s.push('"');
                            i += 2;
                        }
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some(&x) => {
                            let n = eol(i);
                            if n > 0 {
                                line += 1;
                                s.extend(&c[i..i + n]);
                                i += n;
                            } else {
                                s.push(x);
                                i += 1;
                            }
                        }
                    }
                }
                while i < c.len() && blank(c[i]) {
                    i += 1;
                }
                if i < c.len() && c[i] != ',' && eol(i) == 0 {
                    return Err((line, "text after a quoted cell's closing quote (write \"\" for a quote)".into()));
                }
                cells.push(Cell { text: s, quoted: true });
            } else {
                let from = i;
                while i < c.len() && c[i] != ',' && eol(i) == 0 {
                    i += 1;
                }
                let s: String = c[from..i].iter().collect();
                cells.push(Cell { text: s.trim_matches(blank).to_string(), quoted: false });
            }
            if c.get(i) == Some(&',') {
                i += 1;
                continue;
            }
            let n = eol(i);
            if n > 0 {
                i += n;
                line += 1;
            }
            break;
        }
        out.push(Record { line: start, cells });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(text: &str) -> Vec<(usize, Vec<String>)> {
        records(text).unwrap().into_iter().map(|r| (r.line, r.cells.into_iter().map(|c| c.text).collect())).collect()
    }

    #[test]
    fn lines_are_counted_as_an_editor_counts_them_whatever_the_line_ends() {
        let want = vec![(1, vec!["name".to_string(), "x".into()]), (3, vec!["a".into(), "1".into()])];
        for text in ["name,x\n\na,1\n", "name,x\r\n\r\na,1\r\n", "name,x\r\ra,1", "name,x\r\n  \r\na,1"] {
            assert_eq!(texts(text), want, "{text:?}");
        }
        // A quoted cell over two lines: the next record starts two lines later.
        let r = texts("name,x\r\na,\"one\r\ntwo\"\r\nb,2\r\n");
        assert_eq!(r[1], (2, vec!["a".to_string(), "one\r\ntwo".into()]));
        assert_eq!(r[2].0, 4);
    }

    #[test]
    fn quoted_cells_keep_their_spaces_and_unquoted_ones_are_trimmed() {
        let r = records(" a , \"  two  words \" ,\"say \"\"hi\"\"\",,\n").unwrap();
        let cells: Vec<(&str, bool)> = r[0].cells.iter().map(|c| (c.text.as_str(), c.quoted)).collect();
        assert_eq!(cells, [("a", false), ("  two  words ", true), ("say \"hi\"", true), ("", false), ("", false)]);
    }

    #[test]
    fn a_broken_quote_names_its_line() {
        assert_eq!(records("name\r\n\"open\r\nstill\r\n").unwrap_err().0, 2);
        let e = records("name,x\na,\"q\"x\n").unwrap_err();
        assert_eq!(e.0, 2);
        assert!(e.1.contains("after a quoted cell"), "{}", e.1);
    }
}
