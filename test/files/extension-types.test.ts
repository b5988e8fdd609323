import { describe, expect, it } from 'vitest';
import { extensionMatches } from '../../src/modules/files/rules.ts';

describe('extensionMatches', () => {
  it.each([
    ['photo.png', 'image/png', 'the registry type'],
    ['PHOTO.JPG', 'image/jpeg', 'an extension in capitals'],
    ['backup.tar.gz', 'application/gzip', 'the compression'],
    ['backup.tar.gz', 'application/x-tar', 'the compressed file (Python)'],
    ['notes.txt.bz2', 'text/plain', 'the compressed file behind bz2'],
    ['backup.tar.xz', 'application/x-xz', 'the compression behind xz'],
    ['backup.tbz2', 'application/x-bzip2', 'the compression a tar shorthand names'],
    ['backup.txz', 'application/x-tar', 'the tar a shorthand names (Python)'],
    ['drawing.svgz', 'image/svg+xml', 'the registry type'],
    ['drawing.svgz', 'application/gzip', 'the compression svgz names'],
    ['backup.tar.gz', 'application/x-gzip', 'the compression with x-'],
    ['song.flac', 'audio/flac', 'a registry x- type without x-'],
    ['card.vcf', 'text/vcard', 'a registry x- type without x-'],
    ['build.sh', 'text/x-sh', 'an application/x- type under text/'],
    ['build.pl', 'text/x-perl', 'an application/x- type under text/'],
    ['main.c', 'text/plain', 'text/plain for a text-only extension'],
    ['Main.java', 'text/plain', 'text/plain for a text-only extension'],
    ['main.c', 'text/x-c', 'the registry type'],
    ['main.c', 'text/x-csrc', 'Debian and shared-mime-info'],
    ['main.h', 'text/x-chdr', 'Debian and shared-mime-info'],
    ['main.cpp', 'text/x-c++src', 'Debian and shared-mime-info'],
    ['Main.java', 'text/x-java', 'Debian and shared-mime-info'],
    ['table.csv', 'application/vnd.ms-excel', 'browsers on Windows'],
    ['table.csv', 'text/plain', 'text/plain for a text-only extension'],
    ['build.sh', 'application/x-shellscript', 'browsers on Linux'],
    ['module.mjs', 'application/javascript', 'Python before 3.12'],
    ['film.srt', 'text/plain', 'Python and Debian'],
    ['cert.pem', 'application/pem-certificate-chain', 'Debian'],
    ['signing.key', 'application/pgp-keys', 'Debian'],
    ['tool.deb', 'application/vnd.debian.binary-package', 'Debian'],
    ['run.bat', 'application/x-msdos-program', 'Debian'],
    ['clip.m4v', 'video/mp4', 'Debian'],
    ['photo.jfif', 'image/jpeg', 'Debian'],
    ['setup.exe', 'application/x-ms-dos-executable', 'shared-mime-info (Go on Linux)'],
    ['disk.iso', 'application/x-cd-image', 'shared-mime-info (Go on Linux)'],
    ['photo.heic', 'image/heif', 'shared-mime-info (Go on Linux)'],
    ['backup.bz2', 'application/x-bzip', 'shared-mime-info (Go on Linux)'],
    ['script.pl', 'text/plain', 'Python'],
    ['run.bat', 'text/plain', 'Python'],
    ['README', 'text/plain', 'no extension'],
    ['.bashrc', 'text/x-sh', 'a leading dot only'],
    ['data.weird', 'image/png', 'an unknown extension'],
    ['photo.png', 'application/octet-stream', 'the generic type'],
  ])('accepts %s as %s (%s)', (filename, contentType) => {
    expect(extensionMatches(filename, contentType)).toBe(true);
  });

  it.each([
    ['photo.png', 'text/html', 'a page as an image'],
    ['photo.png', 'application/pdf', 'a document as an image'],
    ['setup.exe', 'image/png', 'an image as a program'],
    ['cert.pem', 'text/html', 'a page as a certificate'],
    ['clip.m4v', 'image/svg+xml', 'a drawing as a video'],
    ['photo.html.png', 'text/html', 'an earlier extension not behind a compression'],
    ['photo.png.gz', 'text/html', 'a type neither of a compressed name’s extensions holds'],
    ['drawing.svgz', 'image/png', 'a type neither the compression nor the shorthand holds'],
    ['drawing.svgz', 'application/x-xz', 'another compression than the shorthand names'],
    ['notes.txt', 'text/html', 'text/plain is not every text type'],
    ['image.svg', 'text/plain', 'text/plain for an extension not only text'],
    ['table.csv', 'application/vnd.ms-word', 'a quirk of another extension'],
    ['card.vcf', 'image/x-vcard', 'the subtype under another top-level type than text/ or application/'],
  ])('refuses %s as %s (%s)', (filename, contentType) => {
    expect(extensionMatches(filename, contentType)).toBe(false);
  });
});
