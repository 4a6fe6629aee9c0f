# bash completion for resdiag(1): the commands, each command's options and
# the values of --expect and --what; run files (*.h5) and output files
# elsewhere. Installed as bash-completion/completions/resdiag, where
# bash-completion loads it the first time resdiag is completed; or source it.
# Plain bash (compgen), so it works without bash-completion's helpers too.
# The options are those of `resdiag COMMAND --help` (tests/test-completion.sh
# checks that they agree).

_resdiag()
{
    local cur=${COMP_WORDS[COMP_CWORD]} prev= cmd= i
    ((COMP_CWORD > 0)) && prev=${COMP_WORDS[COMP_CWORD - 1]}
    COMPREPLY=()

    local commands="report check diff plot dump watch help version"
    # The command is the first word after resdiag that is not an option.
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
            -*) ;;
            *) cmd=${COMP_WORDS[i]}; break ;;
        esac
    done
    if [[ -z $cmd ]]; then
        COMPREPLY=($(compgen -W "$commands --help --version" -- "$cur"))
        return 0
    fi

    local opts
    case $cmd in
        report) opts="--step --last --json --html --max-growth --no-consequences --rank --help" ;;
        check) opts="--expect --final-norm --max-growth --step --last --rank --help" ;;
        diff) opts="--step --last --html --no-consequences --rank --help" ;;
        plot) opts="--what -o --output --step --last --rank --help" ;;
        dump) opts="--step --all --rank --help" ;;
        watch) opts="--once --interval --help" ;;
        help)
            ((COMP_CWORD == i + 1)) && COMPREPLY=($(compgen -W "$commands" -- "$cur"))
            return 0 ;;
        *) return 0 ;;
    esac

    # --opt=value: one word "--opt=va", or three ("--opt" "=" "va") where
    # COMP_WORDBREAKS holds '=' (bash's default).
    if [[ $cur == --*=* ]]; then
        prev=${cur%%=*}
        cur=${cur#*=}
    elif [[ $cur == = ]]; then
        cur=
    elif [[ $prev == = ]] && ((COMP_CWORD > 1)); then
        prev=${COMP_WORDS[COMP_CWORD - 2]}
    fi

    case $prev in
        --expect)
            COMPREPLY=($(compgen -W "pre-norm post-norm sandwich deepnorm parallel mixed none
                                     declared" -- "$cur"))
            return 0 ;;
        --what)
            COMPREPLY=($(compgen -W "growth updates gradients loss" -- "$cur"))
            return 0 ;;
        --html | -o | --output)
            compopt -o filenames 2>/dev/null
            COMPREPLY=($(compgen -f -- "$cur"))
            return 0 ;;
        --step | --max-growth | --rank)
            return 0 ;;
    esac

    if [[ $cur == -* ]]; then
        COMPREPLY=($(compgen -W "$opts" -- "$cur"))
        return 0
    fi
    # run files, and directories to find them in
    compopt -o filenames 2>/dev/null
    COMPREPLY=($(compgen -d -- "$cur") $(compgen -f -X '!*.h5' -- "$cur"))
    return 0
}
complete -F _resdiag resdiag
