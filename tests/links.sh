#!/usr/bin/env bash
# links.sh -- every relative link in README.md and docs/*.md resolves: the
# file (or directory) it names exists, and an anchor (#...) names a heading
# of that file, slugged as GitHub does (lower case, punctuation dropped,
# spaces to '-'). Links to http(s) and mailto are not followed. Prints each
# broken link as FILE:LINE: TARGET (why) and exits 1 when there is one.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root" || exit 2

perl -e '
use strict; use warnings;
my %slugs;   # file -> { slug -> 1 }
sub slugs_of {
    my ($f) = @_;
    return $slugs{$f} if $slugs{$f};
    my %s; my %seen; my $fence = 0;
    open(my $h, "<:encoding(UTF-8)", $f) or return $slugs{$f} = {};
    while (my $l = <$h>) {
        $fence = !$fence if $l =~ /^```/;
        next if $fence || $l !~ /^#{1,6}\s+(.*?)\s*$/;
        my $t = lc $1;
        $t =~ s/[^\p{L}\p{N}\s_-]//g;
        $t =~ s/\s/-/g;
        my $n = $seen{$t}++;
        $s{$n ? "$t-$n" : $t} = 1;
    }
    return $slugs{$f} = \%s;
}
my $bad = 0;
for my $f (@ARGV) {
    open(my $h, "<:encoding(UTF-8)", $f) or die "$f: $!";
    my $fence = 0;
    while (my $l = <$h>) {
        my $line = $.;   # slugs_of reads another file, which resets $.
        $fence = !$fence if $l =~ /^```/;
        next if $fence;
        (my $dir = $f) =~ s{[^/]*$}{};
        while ($l =~ /\]\(([^)\s]+)\)/g) {
            my $t = $1;
            next if $t =~ m{^(https?:|mailto:)};
            my ($path, $anchor) = split /#/, $t, 2;
            my $target = $path eq "" ? $f : $dir . $path;
            if (!-e $target) { print "$f:$line: $t (no file $target)\n"; $bad++; next; }
            next unless defined $anchor && $anchor ne "";
            next if -d $target || $target !~ /\.md$/;
            unless (slugs_of($target)->{$anchor}) {
                print "$f:$line: $t (no heading #$anchor in $target)\n"; $bad++;
            }
        }
    }
}
print "links: ", ($bad ? "$bad broken" : "every relative link resolves"), "\n";
exit($bad ? 1 : 0);
' README.md docs/*.md
