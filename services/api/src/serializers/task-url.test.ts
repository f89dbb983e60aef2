import { describe, expect, it } from '@jest/globals';
import { shownTaskUrl } from './task-url.ts';

describe('shownTaskUrl', () => {
  it.each([
    [
      'a URL without credentials, unchanged (not even normalised)',
      'https://Tasks.example.com:443/hook?a=1',
      'https://Tasks.example.com:443/hook?a=1',
    ],
    ['user and password cut', 'http://user:secret@tasks.example.com/hook', 'http://tasks.example.com/hook'],
    ['a user alone cut', 'https://user@tasks.example.com/', 'https://tasks.example.com/'],
    ['a password alone cut', 'https://:secret@tasks.example.com/x', 'https://tasks.example.com/x'],
    ['not a URL, unchanged', 'not a url', 'not a url'],
  ])('%s', (_label, url, shown) => {
    expect(shownTaskUrl(url)).toBe(shown);
  });
});
