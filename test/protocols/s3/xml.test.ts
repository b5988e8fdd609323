import { describe, expect, it } from 'vitest';
import { parseS3Xml, s3Xml } from '../../../src/protocols/s3/xml.ts';

describe('S3 XML answers', () => {
  it('writes the declaration, the namespace and each field as an element', () => {
    expect(s3Xml('Result', { Name: 'bucket', KeyCount: 2, IsTruncated: false })).toBe(
      '<?xml version="1.0" encoding="UTF-8"?>\n' +
        '<Result xmlns="http://s3.amazonaws.com/doc/2006-03-01/">' +
        '<Name>bucket</Name><KeyCount>2</KeyCount><IsTruncated>false</IsTruncated></Result>',
    );
  });

  it('repeats arrays, leaves undefined out, writes null and empty objects as empty elements', () => {
    const body = s3Xml(
      'R',
      {
        Contents: [{ Key: 'a', Size: 0 }, { Key: 'b' }],
        Gone: undefined,
        Empty: null,
        Prefixes: [],
        Owner: {},
      },
      false,
    );
    expect(body.split('\n')[1]).toBe(
      '<R><Contents><Key>a</Key><Size>0</Size></Contents><Contents><Key>b</Key></Contents><Empty/><Owner></Owner></R>',
    );
  });

  it('escapes the five special characters in text and attributes, and reads back as written', () => {
    const key = `a&b<c>"d'e ü/😀`;
    const body = s3Xml('Error', { Key: key, Message: 'x' });
    expect(body).toContain('<Key>a&amp;b&lt;c&gt;&quot;d&apos;e ü/😀</Key>');
    expect(parseS3Xml(body)).toMatchObject({ Error: { Key: key } });
    expect(s3Xml('R', { '@_id': '"1"&', '#text': '<t>' }, false)).toContain(
      '<R id="&quot;1&quot;&amp;">&lt;t&gt;</R>',
    );
  });
});
