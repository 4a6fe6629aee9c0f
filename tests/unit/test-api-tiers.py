#!/usr/bin/env python3
"""test-api-tiers.py - the tiers of include/resdiag.h hold as the header says.

  test-api-tiers.py SOURCE_ROOT LIBRARY.so BUILD_ROOT CC [CC ARGS...]

Checks, from the sources and the built library:
  - the header's counts (the top comment and each tier's banner) are the
    number of functions declared in that tier;
  - every function of the advanced tier is declared inside the
    RESDIAG_ADVANCED_API guard and no other is;
  - lib/resdiag.sym lists each tier's functions under that tier, and the
    library exports exactly those symbols (nm -D);
  - a translation unit without RESDIAG_ADVANCED_API sees none of the
    advanced functions (each one undeclared), and with it sees them all;
  - a call of a deprecated name is a deprecation warning that names the
    new one.
"""
import os
import re
import subprocess
import sys
import tempfile

GUARD = '#if defined(RESDIAG_ADVANCED_API) || defined(RESDIAG_BUILDING_LIBRARY)'
DECL = re.compile(r'RESDIAG_API\s+(?:RESDIAG_DEPRECATED\([^)]*\)\s+)?[^;(]*?\b(resdiag_\w+)\s*\(')

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print('FAIL: ' + what)


def tiers_of_header(text):
    core = text.index('THE STABLE CORE (')
    adv = text.index('THE ADVANCED TIER (')
    dep = text.index('DEPRECATED (')
    return {'core': DECL.findall(text[core:adv]),
            'advanced': DECL.findall(text[adv:dep]),
            'deprecated': DECL.findall(text[dep:])}, text[core:adv], text[adv:dep], text[dep:]


def banner_count(section, title):
    m = re.search(re.escape(title) + r' \((\d+) functions\)', section)
    return int(m.group(1)) if m else -1


def tiers_of_map(text):
    out, tier = {}, None
    for line in text.splitlines():
        m = re.match(r'\s*/\* (the stable core|the advanced tier|deprecated names)', line)
        if m:
            tier = {'the stable core': 'core', 'the advanced tier': 'advanced',
                    'deprecated names': 'deprecated'}[m.group(1)]
            out[tier] = []
            continue
        m = re.match(r'\s*(resdiag_\w+);', line)
        if m:
            check(tier is not None, 'resdiag.sym: %s listed before any tier comment' % m.group(1))
            if tier:
                out[tier].append(m.group(1))
    return out


def compile_unit(cc, includes, source, extra):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, 'tier.c')
        with open(path, 'w') as f:
            f.write(source)
        cmd = cc + ['-std=c11', '-fsyntax-only'] + ['-I' + i for i in includes] + extra + [path]
        p = subprocess.run(cmd, capture_output=True, text=True)
        return p.returncode, p.stderr


def main():
    src, lib, build = sys.argv[1:4]
    cc = sys.argv[4:]
    header = open(os.path.join(src, 'include', 'resdiag.h')).read()
    tiers, core_text, adv_text, dep_text = tiers_of_header(header)
    n = {t: len(v) for t, v in tiers.items()}
    print('tiers: core %d, advanced %d, deprecated %d' % (n['core'], n['advanced'], n['deprecated']))
    check(n['core'] > 0 and n['advanced'] > 0, 'the header has both tiers')

    # the counts the header states
    check(banner_count(core_text, 'THE STABLE CORE') == n['core'], 'core banner count')
    check(banner_count(adv_text, 'THE ADVANCED TIER') == n['advanced'], 'advanced banner count')
    check(banner_count(dep_text, 'DEPRECATED') == n['deprecated'], 'deprecated banner count')
    top = header[:header.index('#ifndef RESDIAG_H')]
    for word, t in (('Stable core', 'core'), ('Advanced', 'advanced'), ('Deprecated', 'deprecated')):
        m = re.search(word + r', (\d+) functions', top)
        check(m is not None and int(m.group(1)) == n[t],
              'the top comment says "%s, %d functions"' % (word, n[t]))

    # the guard encloses exactly the advanced tier
    g = header.find(GUARD)
    check(g > header.index('THE ADVANCED TIER ('), 'the guard opens after the advanced banner')
    end = header.find('#endif /* RESDIAG_ADVANCED_API */', g)
    check(g >= 0 and end > g, 'the advanced tier has its guard and its #endif')
    inside = DECL.findall(header[g:end]) if g >= 0 and end > g else []
    check(sorted(inside) == sorted(tiers['advanced']),
          'the guard holds the advanced functions and no other')

    # the symbol map and the exports
    smap = tiers_of_map(open(os.path.join(src, 'lib', 'resdiag.sym')).read())
    for t in ('core', 'advanced', 'deprecated'):
        a, b = set(tiers[t]), set(smap.get(t, []))
        check(a == b, 'resdiag.sym %s: missing %s, extra %s' % (t, sorted(a - b), sorted(b - a)))
    nm = subprocess.run(['nm', '-D', '--defined-only', lib], capture_output=True, text=True,
                        check=True).stdout
    exported = {l.split()[-1].split('@')[0] for l in nm.splitlines() if ' T ' in l}
    declared = set(sum(tiers.values(), []))
    check(exported == declared, 'exports: undeclared %s, not exported %s'
          % (sorted(exported - declared), sorted(declared - exported)))

    # what a translation unit sees
    includes = [os.path.join(src, 'include'), build]
    refs = ''.join('    (void)&%s;\n' % f for f in tiers['advanced'])
    unit = '#include <resdiag.h>\nint main(void)\n{\n' + refs + '    return 0;\n}\n'
    rc, err = compile_unit(cc, includes, unit, ['-Werror=implicit-function-declaration'])
    check(rc != 0, 'without RESDIAG_ADVANCED_API the advanced functions are undeclared')
    hidden = [f for f in tiers['advanced'] if re.search(r"'%s' undeclared|‘%s’ undeclared" % (f, f), err)]
    check(len(hidden) == n['advanced'], 'each advanced function undeclared without the macro '
          '(%d of %d; visible: %s)' % (len(hidden), n['advanced'],
                                       sorted(set(tiers['advanced']) - set(hidden))))
    rc, err = compile_unit(cc, includes, '#define RESDIAG_ADVANCED_API\n' + unit,
                           ['-pedantic', '-Wall', '-Wextra', '-Werror'])
    check(rc == 0, 'with RESDIAG_ADVANCED_API every advanced function is declared: ' + err[:400])

    for old, new in (('resdiag_reader_close', 'resdiag_reader_destroy'),
                     ('resdiag_analysis_free', 'resdiag_analysis_destroy')):
        unit = '#include <resdiag.h>\nvoid f(void *p);\nvoid f(void *p) { %s(p); }\n' % old
        rc, err = compile_unit(cc, includes, unit, ['-Werror=deprecated-declarations'])
        check(rc != 0 and new in err, '%s is deprecated, naming %s: %s' % (old, new, err[:300]))

    if failures:
        print('%d failure(s)' % len(failures))
        return 1
    print('api tiers: the header, the symbol map and the library agree')
    return 0


if __name__ == '__main__':
    sys.exit(main())
