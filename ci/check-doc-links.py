#!/usr/bin/env python3
# Checks the relative links of the project's Markdown: README.md, docs/*.md,
# scenarios/README.md and deploy/**/README.md. Every inline link or image `[text](target)`
# whose target is not an absolute URL (http:, https:, mailto:, …) must name a file or folder
# that exists, relative to the page, and a `#anchor` (alone, or after a .md target) must be the
# GitHub slug of a heading in that page: lowercased, punctuation other than hyphens, spaces
# and underscores dropped, spaces turned into hyphens, repeats suffixed -1, -2, … Links inside
# fenced code blocks and inline code spans are not links and are skipped.
# Usage: python3 ci/check-doc-links.py   (from anywhere; exits 1 listing every broken link)
import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FENCE = re.compile(r'^ {0,3}(`{3,}|~{3,})')
LINK = re.compile(r'!?\[((?:[^\[\]\\]|\\.|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)')


def pages():
    found = ['README.md', 'scenarios/README.md']
    found += sorted(glob.glob('docs/*.md', root_dir=ROOT))
    found += sorted(glob.glob('deploy/**/README.md', root_dir=ROOT, recursive=True))
    return [p for p in dict.fromkeys(found) if os.path.isfile(os.path.join(ROOT, p))]


def prose(text):
    """The text with fenced code blocks blanked (line numbers kept) and inline code removed."""
    out, fence = [], None
    for line in text.split('\n'):
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(1)[0] * len(m.group(1))
            out.append('')
        elif fence is not None:
            if line.strip().startswith(fence) and line.strip().strip(fence[0]) == '':
                fence = None
            out.append('')
        else:
            out.append(line)
    text = '\n'.join(out)
    # inline code spans: a run of backticks up to the same run; keep line breaks
    return re.sub(r'(`+)(.+?)\1', lambda m: 'code' + '\n' * m.group(0).count('\n'), text,
                  flags=re.S)


def slug(heading):
    heading = re.sub(r'!?\[([^\]]*)\]\([^)]*\)', r'\1', heading)  # links: their text
    heading = re.sub(r'<[^>]+>', '', heading)  # inline HTML
    heading = heading.strip().lower()
    heading = re.sub(r'[^\w\- ]', '', heading)
    return heading.replace(' ', '-')


_anchors = {}


def anchors(path):
    if path not in _anchors:
        with open(path, encoding='utf-8') as f:
            text = f.read()
        seen, found, fence = {}, set(), None
        for line in text.split('\n'):
            m = FENCE.match(line)
            if fence is None and m:
                fence = m.group(1)[0] * len(m.group(1))
                continue
            if fence is not None:
                if line.strip().startswith(fence) and line.strip().strip(fence[0]) == '':
                    fence = None
                continue
            h = re.match(r'^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$', line)
            if not h:
                continue
            s = slug(h.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else '%s-%d' % (s, n))
        found.update(re.findall(r'<a\s+(?:name|id)="([^"]+)"', text))
        _anchors[path] = found
    return _anchors[path]


def main():
    broken, checked = [], 0
    for page in pages():
        path = os.path.join(ROOT, page)
        with open(path, encoding='utf-8') as f:
            text = prose(f.read())
        for m in LINK.finditer(text):
            target = m.group(2)
            line = text.count('\n', 0, m.start()) + 1
            if not target or re.match(r'^[A-Za-z][A-Za-z0-9+.-]*:', target):
                continue  # http(s), mailto, …: not checked
            checked += 1
            file_part, _, anchor = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) \
                if file_part else path
            where = '%s:%d: %s' % (page, line, target)
            if not os.path.exists(dest):
                broken.append('%s: no such file %s' % (where, os.path.relpath(dest, ROOT)))
            elif anchor:
                if not dest.endswith('.md') or os.path.isdir(dest):
                    broken.append('%s: an anchor into a file that is not Markdown' % where)
                elif anchor not in anchors(dest):
                    broken.append('%s: no heading #%s in %s'
                                  % (where, anchor, os.path.relpath(dest, ROOT)))
    for b in broken:
        print(b)
    print('%d pages, %d relative links checked, %d broken' % (len(pages()), checked, len(broken)))
    return 1 if broken else 0


if __name__ == '__main__':
    sys.exit(main())
